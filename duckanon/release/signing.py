"""Signing a release: an Ed25519 signature over its info (which holds its content digest), by a key the custodian
holds; anyone with the public key checks it.  The ``sign`` extra (``cryptography``) does the cryptography.

What is signed is :func:`signed_message` of the release's info: every field but the signature, as canonical JSON, so
a changed row (through the digest) or a changed claim breaks it.  The private key is only ever used to sign: it never
enters a release, its info, a log or an error message (messages name the key's file, never its bytes).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from ..errors import AnonymizationError, MissingExtra, SigningKeyError

SIGNATURE, SIGNING_KEY = "signature", "signing_key"
_ALGORITHM = "ed25519"


def _crypto():
    try:
        from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as error:
        raise MissingExtra("signing and checking signatures needs the 'sign' extra: pip install "
                           "'duckanon[sign]'") from error
    return serialization, ed25519, (InvalidSignature, UnsupportedAlgorithm)


def key_id(public_key) -> str:
    """The fingerprint a release records of the key that signed it: ``ed25519:`` and 32 hex digits of the SHA-256 of
    the raw public key.  It says which key to check with; it proves nothing by itself."""
    serialization, _, _ = _crypto()
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return f"{_ALGORITHM}:{hashlib.sha256(raw).hexdigest()[:32]}"


def signed_message(info: Mapping[str, object]) -> bytes:
    """The bytes a release's signature covers: every field of its info but the signature, decoded JSON fields as
    JSON, the time in ISO form, in canonical JSON (sorted keys, no spaces)."""
    fields = {k: v for k, v in info.items() if k != SIGNATURE}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=True,
                      default=_plain).encode()


def _plain(value: object) -> object:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot sign a {type(value).__name__}")


class Signer:
    """An Ed25519 private key, loaded from an unencrypted PEM or OpenSSH file, PEM bytes, or a ``cryptography`` key."""

    def __init__(self, key: object):
        serialization, ed25519, _ = _crypto()
        if isinstance(key, ed25519.Ed25519PrivateKey):
            self._key = key
        else:
            self._key = _load(key, private=True)
        self.key_id = key_id(self._key.public_key())

    def sign(self, info: Mapping[str, object]) -> str:
        return base64.b64encode(self._key.sign(signed_message(info))).decode("ascii")

    def __repr__(self) -> str:  # never the key itself
        return f"Signer({self.key_id})"


def public_key(key: object):
    """An Ed25519 public key from a PEM or OpenSSH (``ssh-ed25519 …``) file or bytes, or a ``cryptography`` key."""
    _, ed25519, _ = _crypto()
    if isinstance(key, ed25519.Ed25519PublicKey):
        return key
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.public_key()
    return _load(key, private=False)


def check_signature(info: Mapping[str, object], key: object) -> tuple[bool, str]:
    """Whether ``info``'s signature is valid under ``key``, and why not.  A key of another fingerprint than the one
    the release records is reported as a wrong key, not as tampering."""
    _, _, (invalid, _) = _crypto()
    key = public_key(key)
    signature, recorded = info.get(SIGNATURE), info.get(SIGNING_KEY)
    if not signature:
        return False, "the release is not signed"
    if recorded != key_id(key):
        return False, f"the release was signed by key {recorded}, not by the key given ({key_id(key)})"
    try:
        key.verify(base64.b64decode(signature, validate=True), signed_message(info))
    except (invalid, ValueError):
        return False, f"the signature does not match the release's info and content digest (key {recorded})"
    return True, f"signed by key {recorded}"


def _load(key: object, *, private: bool):
    serialization, ed25519, (_, unsupported) = _crypto()
    kind = "private" if private else "public"
    where = "the key given"
    if isinstance(key, (str, os.PathLike)):
        where = f"key file {str(key)!r}"
        try:
            data = Path(key).read_bytes()
        except OSError as error:
            raise SigningKeyError(f"{where} cannot be read: {error.strerror or error}") from None
    elif isinstance(key, bytes):
        data = key
    else:
        raise SigningKeyError(f"an Ed25519 {kind} key is a file path, PEM bytes or a cryptography key, not a "
                        f"{type(key).__name__}")
    loaders = ((serialization.load_pem_private_key, serialization.load_ssh_private_key) if private else
               (serialization.load_pem_public_key, serialization.load_ssh_public_key))
    for loader in loaders:
        try:
            loaded = loader(data, None) if private else loader(data)
        except TypeError:
            # Messages of the loaders never echo the key; ours name only where it came from.
            raise SigningKeyError(f"{where} is encrypted: load it with cryptography and pass the key object") from None
        except (ValueError, unsupported):
            continue
        wanted = ed25519.Ed25519PrivateKey if private else ed25519.Ed25519PublicKey
        if not isinstance(loaded, wanted):
            raise SigningKeyError(f"{where} is not an Ed25519 {kind} key ({type(loaded).__name__})")
        return loaded
    raise SigningKeyError(f"{where} is not an Ed25519 {kind} key in PEM or OpenSSH form")


def new_key_pair(path: str | os.PathLike) -> tuple[Path, Path]:
    """A new Ed25519 key pair: the private key to ``path`` (PEM, readable by its owner only) and the public one to
    ``path.pub``; neither file may exist already."""
    serialization, ed25519, _ = _crypto()
    private_path, public_path = Path(path), Path(f"{path}.pub")
    for existing in (private_path, public_path):
        if existing.exists():
            raise AnonymizationError(f"{str(existing)!r} exists: a key is never overwritten; choose another path")
    if not private_path.parent.is_dir():
        raise AnonymizationError(f"the folder of {str(private_path)!r} does not exist: create it first")
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    handle = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(handle, "wb") as file:
        file.write(private)
    public_path.write_bytes(public)
    return private_path, public_path
