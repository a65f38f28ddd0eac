"""Hierarchies: generalization trees and interval hierarchies, their label notation, and a hierarchy bound to its
stored table."""
