"""Seed 003 (Cao, Zhang, Bi, Zhao 2018, "Personalized (α,l)-diversity k-anonymity model for privacy preservation",
Computer Science 45(11)): its example tables, checked with duckanon's models against outcomes computed by hand.

The tables are copied by hand from the paper; nothing is read from outside the repository at run time.

Notation in the comments: a class is written by its values of the quasi-identifiers (Gender, Age, Zip code) and
its Disease values; "Sid" is a value's sensitivity level from Table 4 (4 = top secret … 1 = not secret).
"""

from __future__ import annotations

import pandas as pd
import pytest

import duckanon
from duckanon import (
    AlphaKAnonymity,
    AlphaLDiversityKAnonymity,
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    PSensitiveKAnonymity,
    RecursiveCLDiversity,
    TCloseness,
)

QI = ["Gender", "Age", "Zip code"]
S = "Disease"
COLUMNS = [*QI, S]

# Table 1 (original data), Name dropped.
TABLE_1 = pd.DataFrame([
    ("Male", "34", "100751", "Cancer"),
    ("Male", "43", "100720", "Flu"),
    ("Female", "25", "200386", "HIV"),
    ("Female", "28", "200425", "HIV"),
    ("Female", "55", "178642", "Cancer"),
    ("Female", "48", "178653", "Flu"),
    ("Female", "59", "178634", "HIV"),
], columns=COLUMNS)

# Table 2: 2-anonymous table.
T2_G1, T2_G2, T2_G3 = ("Male", "[31, 45]", "100***"), ("Female", "[16, 30]", "200***"), ("Female", "[46, 60]", "1786**")
TABLE_2 = pd.DataFrame([
    (*T2_G1, "Cancer"), (*T2_G1, "Flu"),
    (*T2_G2, "HIV"), (*T2_G2, "HIV"),
    (*T2_G3, "Cancer"), (*T2_G3, "Flu"), (*T2_G3, "HIV"),
], columns=COLUMNS)

# Table 3: 2-diverse table.
T3_G1, T3_G2, T3_G3 = ("Male", "[31, 45]", "100***"), ("Female", "[61, 75]", "200***"), ("Female", "[46, 60]", "1786**")
TABLE_3 = pd.DataFrame([
    (*T3_G1, "Cancer"), (*T3_G1, "HIV"),
    (*T3_G2, "HIV"), (*T3_G2, "Flu"),
    (*T3_G3, "Cancer"), (*T3_G3, "Flu"), (*T3_G3, "HIV"),
], columns=COLUMNS)

# Table 4: sensitivity levels (Sid) of the eight Disease values.
LEVELS = {"HIV": 4, "Cancer": 4, "Phthisis": 3, "Hepatitis": 3, "Heart Disease": 2, "Asthma": 2, "Flu": 1,
          "Indigestion": 1}

# Table 5, the (0.5, 2)-diversity 2-anonymous table.  The text of Table 5 is garbled: its "group 2" holds rows with
# two different quasi-identifier values ([61,75]/200*** and [46,60]/1786**), and its last row is "HIV" with Sid 3
# although Table 4 gives HIV Sid 4.  Table 7 is the same release after the personalization step, and Table 6 lists
# its records with their Sids: the seventh record is Hepatitis (Sid 3), not HIV.  So Table 5 is Table 6's records
# grouped as in Table 7: {Cancer(4), Flu(1)}, {HIV(4), Asthma(2)}, {Cancer(4), Flu(1), Hepatitis(3)}.  (Table 6's
# seventh record also has age 36, outside its group's [46, 60]; only the generalized values matter here.)
T5_G1, T5_G2, T5_G3 = ("Male", "[31, 45]", "100***"), ("Female", "[61, 75]", "200***"), ("Female", "[46, 60]", "1786**")
TABLE_5 = pd.DataFrame([
    (*T5_G1, "Cancer"), (*T5_G1, "Flu"),
    (*T5_G2, "HIV"), (*T5_G2, "Asthma"),
    (*T5_G3, "Cancer"), (*T5_G3, "Flu"), (*T5_G3, "Hepatitis"),
], columns=COLUMNS)

# Table 7: the personalized (0.5, 2)-diversity 2-anonymous table: record 2 asked for privacy level 2 > Sid 1, so its
# Flu became its parent in the Disease hierarchy, "Respiratory infection".
TABLE_7 = TABLE_5.copy()
TABLE_7.loc[1, S] = "Respiratory infection"

TABLES = {"table 2": TABLE_2, "table 3": TABLE_3, "table 5": TABLE_5, "table 7": TABLE_7}


def test_tables_copied_as_printed():
    for frame in TABLES.values():
        assert len(frame) == 7 and frame.groupby(QI).size().sort_values().tolist() == [2, 2, 3]
    assert TABLE_2[S].value_counts().to_dict() == {"HIV": 3, "Cancer": 2, "Flu": 2}
    assert TABLE_5[S].map(LEVELS).tolist() == [4, 1, 4, 2, 4, 1, 3]  # Table 6's Sid column


# ----------------------------------------------------------------------------------------------- k-anonymity

@pytest.mark.parametrize("name", list(TABLES))
def test_seed_tables_are_2_anonymous_not_3_anonymous(check_frame, violating, name):
    report = check_frame(TABLES[name], QI, [KAnonymity(1), KAnonymity(2), KAnonymity(3)])
    assert (report.records, report.classes, report.smallest_class) == (7, 3, 2)
    assert report.per_model["violating_classes"].tolist() == [0, 0, 2]
    assert report.per_model["violating_records"].tolist() == [0, 0, 4]
    # The two classes of two records fail k = 3.
    frame = TABLES[name]
    pairs = {g for g, size in frame.groupby(QI).size().items() if size == 2}
    assert violating(report, 2) == pairs


def test_table_1_is_only_1_anonymous(check_frame):
    report = check_frame(TABLE_1, QI, [KAnonymity(1), KAnonymity(2)])
    assert (report.classes, report.smallest_class) == (7, 1)
    assert report.per_model["violating_classes"].tolist() == [0, 7]


# ---------------------------------------------------------------------------------------------- l-diversity

def test_table_2_is_not_distinct_2_diverse(check_frame, violating):
    # Group 2 = (HIV, HIV): one distinct value, so Lily's disease is disclosed (the paper's homogeneity example).
    report = check_frame(TABLE_2, QI, [DistinctLDiversity(S, 2), DistinctLDiversity(S, 3)])
    assert report.per_model["violating_classes"].tolist() == [1, 2]
    assert report.per_model["violating_records"].tolist() == [2, 4]
    assert violating(report, 0) == {T2_G2}
    assert violating(report, 1) == {T2_G1, T2_G2}  # group 3 has Cancer, Flu, HIV: 3 distinct values
    # The listing names the classes by their (generalized) quasi-identifier values.
    listing = report.violations
    assert list(listing.columns[:4]) == [*QI, "size"]
    homogeneous = listing[listing.iloc[:, 4].astype(bool)]
    assert homogeneous[[*QI, "size"]].values.tolist() == [["Female", "[16, 30]", "200***", 2]]


def test_table_3_is_distinct_2_diverse(check_frame, violating):
    report = check_frame(TABLE_3, QI, [DistinctLDiversity(S, 2), DistinctLDiversity(S, 3)])
    assert report.per_model["violating_classes"].tolist() == [0, 2]
    assert violating(report, 1) == {T3_G1, T3_G2}


def test_entropy_l_diversity(check_frame, violating):
    # Table 2: H(g1) = ln 2 = 0.693 (Cancer, Flu), H(g2) = 0 (HIV, HIV), H(g3) = ln 3 = 1.099 (three values).
    report = check_frame(TABLE_2, QI, [EntropyLDiversity(S, 1.5), EntropyLDiversity(S, 2), EntropyLDiversity(S, 3),
                                       EntropyLDiversity(S, 1)])
    assert violating(report, 0) == {T2_G2}          # ln 1.5 = 0.405
    assert violating(report, 1) == {T2_G2}          # ln 2: g1 is exactly at the bound and passes
    assert violating(report, 2) == {T2_G1, T2_G2}   # ln 3: g3 is exactly at the bound and passes
    assert violating(report, 3) == set()            # ln 1 = 0: every class
    # Table 3: ln 2, ln 2, ln 3.  Table 5: ln 2, ln 2, ln 3.
    for table, (g1, g2, _g3) in ((TABLE_3, (T3_G1, T3_G2, T3_G3)), (TABLE_5, (T5_G1, T5_G2, T5_G3))):
        report = check_frame(table, QI, [EntropyLDiversity(S, 2), EntropyLDiversity(S, 2.01), EntropyLDiversity(S, 3)])
        assert violating(report, 0) == set()
        assert violating(report, 1) == {g1, g2}
        assert violating(report, 2) == {g1, g2}


def test_recursive_cl_diversity(check_frame, violating):
    # Counts in decreasing order r1, r2, …; a class passes when r1 < c·(r_l + … + r_m).
    # Table 2: g1 = (1, 1), g2 = (2), g3 = (1, 1, 1).
    report = check_frame(TABLE_2, QI, [RecursiveCLDiversity(S, 2, 2), RecursiveCLDiversity(S, 1, 2),
                                       RecursiveCLDiversity(S, 2, 3), RecursiveCLDiversity(S, 1, 3)])
    # (2,2): g1 1 < 2·1 yes; g2 2 < 2·0 no; g3 1 < 2·2 yes.
    assert violating(report, 0) == {T2_G2}
    # (1,2): g1 1 < 1·1 no (strict); g2 no; g3 1 < 1·2 yes.
    assert violating(report, 1) == {T2_G1, T2_G2}
    # (2,3): g1 has no r3, 1 < 0 no; g2 no; g3 1 < 2·1 yes.
    assert violating(report, 2) == {T2_G1, T2_G2}
    # (1,3): g3 1 < 1·1 no.
    assert violating(report, 3) == {T2_G1, T2_G2, T2_G3}
    assert report.per_model["violating_records"].tolist() == [2, 4, 4, 7]
    # Table 5: g1 = (1, 1), g2 = (1, 1), g3 = (1, 1, 1): (1,2) fails g1 and g2 (1 < 1), (1.5,2) passes all.
    report = check_frame(TABLE_5, QI, [RecursiveCLDiversity(S, 1, 2), RecursiveCLDiversity(S, 1.5, 2)])
    assert violating(report, 0) == {T5_G1, T5_G2}
    assert violating(report, 1) == set()


# ------------------------------------------------------------------------------ (α,k)-anonymity, p-sensitive

def test_alpha_k_anonymity(check_frame, violating):
    # Table 2 largest value shares: g1 1/2 (Cancer or Flu), g2 1 (HIV), g3 1/3.
    report = check_frame(TABLE_2, QI, [
        AlphaKAnonymity(S, 0.5, 2), AlphaKAnonymity(S, 0.4, 2), AlphaKAnonymity(S, 0.5, 3),
        AlphaKAnonymity(S, 0.5, 2, highly_sensitive=["Cancer"]),
        AlphaKAnonymity(S, 0.4, 2, highly_sensitive=["Cancer"]),
        AlphaKAnonymity(S, 0.4, 2, highly_sensitive=["HIV"]), AlphaKAnonymity(S, 1 / 3, 2)])
    assert violating(report, 0) == {T2_G2}             # 1 > 0.5
    assert violating(report, 1) == {T2_G1, T2_G2}      # 1/2 > 0.4
    assert violating(report, 2) == {T2_G1, T2_G2}      # sizes 2 < 3
    assert violating(report, 3) == set()               # Cancer shares: 1/2, 0, 1/3
    assert violating(report, 4) == {T2_G1}             # 1/2 > 0.4
    assert violating(report, 5) == {T2_G2}             # HIV shares: 0, 1, 1/3
    assert violating(report, 6) == {T2_G1, T2_G2}      # g3's 1/3 is exactly at the bound and passes
    # Table 5: every class has shares 1/2, 1/2 or 1/3 each.
    report = check_frame(TABLE_5, QI, [
        AlphaKAnonymity(S, 0.5, 2), AlphaKAnonymity(S, 0.4, 2),
        AlphaKAnonymity(S, 0.4, 2, highly_sensitive=["HIV", "Cancer"]),
        AlphaKAnonymity(S, 0.3, 2, highly_sensitive=["Hepatitis"])])
    assert violating(report, 0) == set()
    assert violating(report, 1) == {T5_G1, T5_G2}
    assert violating(report, 2) == {T5_G1, T5_G2}      # Cancer 1/2, HIV 1/2, Cancer 1/3
    assert violating(report, 3) == {T5_G3}             # Hepatitis 1/3 > 0.3
    # Table 3 meets (0.5, 2)-anonymity although group 1 is {Cancer, HIV}, both top secret: the paper's motivation.
    report = check_frame(TABLE_3, QI, [AlphaKAnonymity(S, 0.5, 2),
                                       AlphaKAnonymity(S, 0.5, 2, highly_sensitive=["HIV", "Cancer"])])
    assert report.violating_classes == 0


def test_p_sensitive_k_anonymity(check_frame, violating):
    # Table 2 distinct values 2, 1, 3; sizes 2, 2, 3.
    report = check_frame(TABLE_2, QI, [PSensitiveKAnonymity(S, 2, 2), PSensitiveKAnonymity(S, 2, 3),
                                       PSensitiveKAnonymity(S, 3, 3), PSensitiveKAnonymity(S, 1, 2)])
    assert violating(report, 0) == {T2_G2}
    assert violating(report, 1) == {T2_G1, T2_G2}
    assert violating(report, 2) == {T2_G1, T2_G2}
    assert violating(report, 3) == set()
    for table in (TABLE_3, TABLE_5, TABLE_7):
        report = check_frame(table, QI, [PSensitiveKAnonymity(S, 2, 2), PSensitiveKAnonymity(S, 3, 3)])
        assert report.per_model["violating_classes"].tolist() == [0, 2]
        assert report.per_model["violating_records"].tolist() == [0, 4]


def test_t_closeness_equal_distance_on_table_2(check_frame, violating):
    # Table 2 overall: Cancer 2/7, Flu 2/7, HIV 3/7.
    # g1 (1/2, 1/2, 0): (3/14 + 3/14 + 6/14) / 2 = 3/7 = 0.4286
    # g2 (0, 0, 1):     (4/14 + 4/14 + 8/14) / 2 = 4/7 = 0.5714
    # g3 (1/3 each):    (1/21 + 1/21 + 2/21) / 2 = 2/21 = 0.0952
    report = check_frame(TABLE_2, QI, [TCloseness(S, 0.5), TCloseness(S, 0.43), TCloseness(S, 0.42),
                                       TCloseness(S, 3 / 7), TCloseness(S, 0.09)])
    assert violating(report, 0) == {T2_G2}
    assert violating(report, 1) == {T2_G2}
    assert violating(report, 2) == {T2_G1, T2_G2}
    assert violating(report, 3) == {T2_G2}  # exactly at the bound passes
    assert violating(report, 4) == {T2_G1, T2_G2, T2_G3}


# ------------------------------------------------------------------------------ (α,l)-diversity k-anonymity

def test_table_5_is_05_2_diverse_2_anonymous(check_frame, violating):
    # Sid shares per class: g1 {4: 1/2, 1: 1/2}, g2 {4: 1/2, 2: 1/2}, g3 {4: 1/3, 1: 1/3, 3: 1/3}; 2, 2, 3 distinct.
    models = [AlphaLDiversityKAnonymity(S, 0.5, 2, 2, LEVELS),
              AlphaLDiversityKAnonymity(S, 0.4, 2, 2, LEVELS),     # 1/2 > 0.4 in g1 and g2; g3's 1/3 passes
              AlphaLDiversityKAnonymity(S, 1 / 3, 2, 2, LEVELS),   # g3 exactly at the bound passes
              AlphaLDiversityKAnonymity(S, 0.3, 2, 2, LEVELS),     # 1/3 > 0.3 too
              AlphaLDiversityKAnonymity(S, 0.5, 3, 3, LEVELS)]     # g1, g2: 2 records, 2 distinct values
    report = check_frame(TABLE_5, QI, models)
    assert report.per_model["violating_classes"].tolist() == [0, 2, 2, 3, 2]
    assert report.per_model["violating_records"].tolist() == [0, 4, 4, 7, 4]
    assert violating(report, 1) == {T5_G1, T5_G2}
    assert violating(report, 2) == {T5_G1, T5_G2}
    assert violating(report, 4) == {T5_G1, T5_G2}


def test_table_5_as_printed_would_not_be_05_diverse(check_frame, violating):
    # Read literally, Table 5's third group (the [46,60]/1786** rows) is {Cancer, Flu, HIV}: Sid 4 twice, share
    # 2/3 > 0.5, contradicting the paper's claim; with Hepatitis (Table 6/7) it holds.
    literal = TABLE_5.copy()
    literal.loc[6, S] = "HIV"
    report = check_frame(literal, QI, [AlphaLDiversityKAnonymity(S, 0.5, 2, 2, LEVELS)])
    assert violating(report, 0) == {T5_G3}


def test_alpha_l_diversity_on_tables_2_and_3(check_frame, violating):
    # Table 2: g1 {Cancer 4, Flu 1} share 1/2; g2 {HIV 4, HIV 4} share 1, 1 distinct; g3 {Cancer 4, Flu 1, HIV 4}
    # share 2/3.
    report = check_frame(TABLE_2, QI, [AlphaLDiversityKAnonymity(S, 0.5, 2, 2, LEVELS),
                                       AlphaLDiversityKAnonymity(S, 0.7, 2, 2, LEVELS),
                                       AlphaLDiversityKAnonymity(S, 1, 2, 2, LEVELS)])
    assert violating(report, 0) == {T2_G2, T2_G3}
    assert violating(report, 1) == {T2_G2}
    assert violating(report, 2) == {T2_G2}  # only the l = 2 condition
    # Table 3 is 2-diverse, but g1 = {Cancer, HIV} is all Sid 4 (share 1) and g3 = {Cancer, Flu, HIV} has 2/3.
    report = check_frame(TABLE_3, QI, [AlphaLDiversityKAnonymity(S, 0.5, 2, 2, LEVELS)])
    assert violating(report, 0) == {T3_G1, T3_G3}
    assert report.violating_records == 5


def test_table_7_with_generalized_value(check_frame, violating):
    # The paper gives no Sid to "Respiratory infection"; keeping Flu's Sid 1 for it, Table 7 is what Table 5 is.
    levels = {**LEVELS, "Respiratory infection": 1}
    report = check_frame(TABLE_7, QI, [AlphaLDiversityKAnonymity(S, 0.5, 2, 2, levels),
                                       AlphaLDiversityKAnonymity(S, 0.4, 2, 2, levels),
                                       DistinctLDiversity(S, 2), EntropyLDiversity(S, 2)])
    assert report.per_model["violating_classes"].tolist() == [0, 2, 0, 0]
    assert violating(report, 1) == {T5_G1, T5_G2}


def _policy(frame, models):
    hierarchies = {q: duckanon.Hierarchy.from_lists([[v, "*"] for v in sorted(frame[q].unique())], name=q) for q in QI}
    return duckanon.Policy(quasi_identifiers=hierarchies, models=models)


def test_through_the_anonymizer(con):
    con.register("table5", TABLE_5)
    anon = duckanon.connect(con)
    levels = {q: 0 for q in QI}
    report = anon.check("table5", _policy(TABLE_5, [AlphaLDiversityKAnonymity(S, 0.5, 2, 2, LEVELS)]), levels)
    assert report.satisfied and report.classes == 3
    # alpha = 0.45: g1 and g2 have a Sid-4 share of 1/2 (alpha = 0.4 itself is refused up front, see below).
    report = anon.check("table5", _policy(TABLE_5, [AlphaLDiversityKAnonymity(S, 0.45, 2, 2, LEVELS)]), levels)
    assert (report.violating_classes, report.violating_records) == (2, 4)
    # Generalizing every quasi-identifier to * makes one class: Sid 4 has 3/7 <= 0.45, 5 distinct values, 7 records.
    top = {q: 1 for q in QI}
    assert anon.check("table5", _policy(TABLE_5, [AlphaLDiversityKAnonymity(S, 0.45, 5, 7, LEVELS)]), top).satisfied


def test_level_table_must_cover_every_value(con):
    # Table 4 has no level for Table 7's "Respiratory infection".
    con.register("table7", TABLE_7)
    anon = duckanon.connect(con)
    with pytest.raises(duckanon.PolicyError, match="Respiratory infection"):
        anon.check("table7", _policy(TABLE_7, [AlphaLDiversityKAnonymity(S, 0.5, 2, 2, LEVELS)]), {q: 0 for q in QI})


def test_alpha_below_a_levels_overall_share_is_impossible(con):
    # Sid 4 is 3 of Table 5's 7 records (0.4286): whatever the classes, one has a Sid-4 share of at least 3/7
    # (pigeonhole), so alpha = 0.4 is rejected before any check.
    con.register("table5", TABLE_5)
    anon = duckanon.connect(con)
    with pytest.raises(duckanon.PolicyError, match="no release can satisfy alpha=0.4: sensitivity level 4"):
        anon.check("table5", _policy(TABLE_5, [AlphaLDiversityKAnonymity(S, 0.4, 2, 2, LEVELS)]), {q: 0 for q in QI})
    # alpha = 3/7 is possible (the single class of all records meets it); here g1 and g2 (share 1/2) violate it.
    report = anon.check("table5", _policy(TABLE_5, [AlphaLDiversityKAnonymity(S, 3 / 7, 2, 2, LEVELS)]),
                        {q: 0 for q in QI})
    assert (report.violating_classes, report.violating_records) == (2, 4)
