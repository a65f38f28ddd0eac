-- duckanon.sql: anonymization macros for the DuckDB shell and any DuckDB client.
--
--   duckdb my.db
--   D .read /path/to/sql/duckanon.sql
--   D SELECT * FROM anon_k_anonymity('adult', ['age', 'sex', 'race']);
--
-- Self-contained: it reads no other file, so it works from any working directory.
-- Tested with the DuckDB shell 1.5.x and the duckdb 2.0 Python package.
--
-- All macros are TEMP (they live in the session, not in your database file, and
-- work on read-only databases) and start with `anon_`; `anon__*` are internal helpers.
-- Reading the file again replaces them.
--
-- Arguments are values, never SQL text: `tbl` is a table or view name (optionally
-- qualified, e.g. 'main.adult'; quote a name holding a dot or a double quote as in SQL,
-- e.g. '"my.table"' or '"a""b"' for a table named a"b) read by anon__from(); `qi_cols` is a list of
-- column names and `sensitive` one column name, matched against the table's columns
-- like DuckDB matches identifiers (ASCII case-insensitive; spaces, quotes, hyphens and
-- non-ASCII letters are fine). A name that is not a column raises an error instead of
-- being ignored. NULL is a value of its own: NULLs form one class, as in GROUP BY.
--
-- Lambdas use the `lambda x: ...` syntax: DuckDB 2.0 rejects the old `x -> ...` arrow.

-- anon__fold(s) -> s with ASCII letters lower-cased (DuckDB's identifier case folding).
CREATE OR REPLACE TEMP MACRO anon__fold(s) AS
    translate(s, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');

-- anon__in(cols, c) -> true when column name c is one of the names in the list cols.
CREATE OR REPLACE TEMP MACRO anon__in(cols, c) AS
    list_contains(list_transform(cols, lambda x: anon__fold(x)), anon__fold(c));

-- anon__num(v) -> v as text, integral values without a fraction ('30', '2.5', '-5').
CREATE OR REPLACE TEMP MACRO anon__num(v) AS
    CASE
        WHEN v = trunc(v) AND abs(v) < 1e18 THEN CAST(CAST(trunc(v) AS HUGEINT) AS VARCHAR)
        ELSE CAST(CAST(v AS DOUBLE) AS VARCHAR)
    END;

-- anon__ident(s) -> s as a quoted SQL identifier: '"' || s || '"' with each '"' doubled.
CREATE OR REPLACE TEMP MACRO anon__ident(s) AS '"' || replace(s, '"', '""') || '"';

-- anon__name(tbl) -> the table or view name tbl as SQL text: '"part"."part"'. A part of
-- tbl is "…" (with "" for a quote inside) or a run of characters other than '.' and '"';
-- each part is re-quoted, so the text is only ever a name.
CREATE OR REPLACE TEMP MACRO anon__name(tbl) AS
    CASE
        WHEN tbl IS NULL THEN error('duckanon: no table name given')
        WHEN NOT regexp_full_match(tbl, '("(?:[^"]|"")*"|[^."]+)(\.("(?:[^"]|"")*"|[^."]+))*')
            THEN error('duckanon: not a valid qualified name of a table: ' || tbl
                       || ' (quote a part holding a dot or a quote as in SQL: "my.table", "a""b")')
        ELSE array_to_string(list_transform(regexp_extract_all(tbl, '"(?:[^"]|"")*"|[^."]+'),
                 lambda p: anon__ident(CASE WHEN p[1] = '"' THEN replace(p[2:-2], '""', '"') ELSE p END)), '.')
    END;

-- anon__from(tbl) -> the text 'SELECT * FROM "part"."part"' that query() runs to read the
-- table or view named tbl. query_table(tbl) is not used: the 1.5 shell's query_table
-- reads table ab when given '"a""b"'.
CREATE OR REPLACE TEMP MACRO anon__from(tbl) AS 'SELECT * FROM ' || anon__name(tbl);

-- anon__check(tbl, cols) -> one row (ok = true); raises an error naming every entry of
-- cols that is not a column of tbl.
CREATE OR REPLACE TEMP MACRO anon__check(tbl, cols) AS TABLE
    SELECT CASE
               WHEN cols IS NULL OR len(list_filter(cols, lambda x: x IS NOT NULL)) = 0
                   THEN error('duckanon: no column names given')
               WHEN len(missing) > 0
                   THEN error('duckanon: not a column of ' || CAST(tbl AS VARCHAR) || ': '
                              || array_to_string(list_transform(missing,
                                     lambda x: coalesce(x, 'NULL')), ', '))
               ELSE true
           END AS ok
    FROM (
        SELECT list_filter(cols, lambda x: x IS NULL
                   OR NOT list_contains(list_transform(found, lambda f: anon__fold(f)), anon__fold(x)))
                   AS missing
        FROM (
            -- The outer join yields one row even for an empty table.
            SELECT json_keys(to_json(struct_pack(*COLUMNS(lambda c: anon__in(cols, c))))) AS found
            FROM (SELECT 1 AS __duckanon_pad__)
                 LEFT JOIN (SELECT * FROM query(anon__from(tbl)) LIMIT 1) ON true
            LIMIT 1
        )
    );

-- anon__classes_sensitive(tbl, qi_cols, sensitive) -> anon_equivalence_classes(tbl,
-- qi_cols, sensitive) unsorted.
CREATE OR REPLACE TEMP MACRO anon__classes_sensitive(tbl, qi_cols, sensitive) AS TABLE
    SELECT COLUMNS(lambda c: anon__in(qi_cols, c)),
           CAST(sum(__anon_n) AS BIGINT) AS class_size,
           count(*) AS distinct_sensitive,
           -- exp(entropy) = exp(ln N - sum(n ln n) / N), clamped to its exact bounds
           -- [1, distinct values] against rounding (a one-value class gives exactly 1).
           greatest(1.0, least(count(*),
               exp(ln(sum(__anon_n)) - sum(__anon_n * ln(__anon_n)) / sum(__anon_n)))) AS entropy_l
    FROM (
        -- one row per (class, sensitive value) with its count __anon_n
        SELECT COLUMNS(lambda c: anon__in(qi_cols, c) OR anon__fold(c) = anon__fold(sensitive)),
               count(*) AS __anon_n
        FROM query(anon__from(tbl))
        WHERE (SELECT ok FROM anon__check(tbl, list_append(qi_cols, sensitive)))
        GROUP BY ALL
    )
    GROUP BY ALL;

-- anon_equivalence_classes(tbl, qi_cols) -> one row per equivalence class: the
-- quasi-identifier columns (in the table's column order) and class_size; smallest
-- classes first.
-- anon_equivalence_classes(tbl, qi_cols, sensitive) -> also distinct_sensitive (number of
-- distinct values of the sensitive column in the class) and entropy_l (exp of the
-- entropy of the sensitive values in the class).
CREATE OR REPLACE TEMP MACRO anon_equivalence_classes(tbl, qi_cols) AS TABLE (
    SELECT *
    FROM (
        SELECT COLUMNS(lambda c: anon__in(qi_cols, c)),
               count(*) AS class_size
        FROM query(anon__from(tbl))
        WHERE (SELECT ok FROM anon__check(tbl, qi_cols))
        GROUP BY ALL
    )
    ORDER BY class_size, struct_pack(*COLUMNS(lambda c: anon__in(qi_cols, c)))
),
(tbl, qi_cols, sensitive) AS TABLE (
    SELECT *
    FROM anon__classes_sensitive(tbl, qi_cols, sensitive)
    ORDER BY class_size, struct_pack(*COLUMNS(lambda c: anon__in(qi_cols, c)))
);

-- anon__sizes(tbl, qi_cols) -> one row per equivalence class with its size __anon_n.
CREATE OR REPLACE TEMP MACRO anon__sizes(tbl, qi_cols) AS TABLE
    SELECT COLUMNS(lambda c: anon__in(qi_cols, c)), count(*) AS __anon_n
    FROM query(anon__from(tbl))
    WHERE (SELECT ok FROM anon__check(tbl, qi_cols))
    GROUP BY ALL;

-- anon_k_anonymity(tbl, qi_cols) -> one row: k (size of the smallest equivalence class,
-- NULL for an empty table), classes (number of classes), records (number of rows).
-- anon_k_anonymity(tbl, qi_cols, k_target) -> also violating_classes and
-- violating_records: the classes smaller than k_target and the rows in them.
CREATE OR REPLACE TEMP MACRO anon_k_anonymity(tbl, qi_cols) AS TABLE (
    SELECT CAST(min(__anon_n) AS BIGINT) AS k,
           count(*) AS classes,
           CAST(coalesce(sum(__anon_n), 0) AS BIGINT) AS records
    FROM anon__sizes(tbl, qi_cols)
),
(tbl, qi_cols, k_target) AS TABLE (
    SELECT CAST(min(__anon_n) AS BIGINT) AS k,
           count(*) AS classes,
           CAST(coalesce(sum(__anon_n), 0) AS BIGINT) AS records,
           count(*) FILTER (WHERE __anon_n < k_target) AS violating_classes,
           CAST(coalesce(sum(__anon_n) FILTER (WHERE __anon_n < k_target), 0) AS BIGINT)
               AS violating_records
    FROM anon__sizes(tbl, qi_cols)
);

-- anon_person_exposure(tbl, qi_cols, person, k) -> one row: how exposed people are when
-- one person has several records (column person names each record's person): people,
-- records, classes, signatures (a person's signature is the set of classes of their
-- records), people_in_small_classes (people with a record in a class of fewer than k
-- people), people_below_k (people whose signature fewer than k people share),
-- unique_people (a signature nobody else has) and smallest_signature_group, as
-- duckanon's Anonymizer.person_exposure counts them.
CREATE OR REPLACE TEMP MACRO anon_person_exposure(tbl, qi_cols, person, k) AS TABLE
WITH records AS (
    SELECT struct_pack(*COLUMNS(lambda c: anon__in(qi_cols, c))) AS __anon_class,
           struct_pack(*COLUMNS(lambda c: anon__fold(c) = anon__fold(person))) AS __anon_person
    FROM query(anon__from(tbl))
    WHERE (SELECT ok FROM anon__check(tbl, list_append(qi_cols, person)))
), signed AS (
    SELECT __anon_person, list_sort(list(DISTINCT __anon_class)) AS __anon_signature
    FROM records GROUP BY __anon_person
), groups AS (
    SELECT __anon_signature, count(*) AS __anon_people FROM signed GROUP BY __anon_signature
), per_class AS (
    SELECT __anon_class, count(DISTINCT __anon_person) AS __anon_people FROM records GROUP BY __anon_class
)
SELECT (SELECT count(*) FROM signed) AS people,
       (SELECT count(*) FROM records) AS records,
       (SELECT count(*) FROM per_class) AS classes,
       (SELECT count(*) FROM groups) AS signatures,
       (SELECT count(DISTINCT __anon_person) FROM records
        WHERE __anon_class IN (SELECT __anon_class FROM per_class WHERE __anon_people < k)) AS people_in_small_classes,
       (SELECT CAST(coalesce(sum(__anon_people), 0) AS BIGINT) FROM groups WHERE __anon_people < k) AS people_below_k,
       (SELECT count(*) FROM groups WHERE __anon_people = 1) AS unique_people,
       (SELECT min(__anon_people) FROM groups) AS smallest_signature_group;

-- anon_l_diversity(tbl, qi_cols, sensitive) -> one row: l (distinct l-diversity: the
-- smallest number of distinct sensitive values in a class; NULL counts as a value),
-- entropy_l (entropy l-diversity: the smallest exp(entropy of the sensitive values) over
-- the classes), classes, records.
CREATE OR REPLACE TEMP MACRO anon_l_diversity(tbl, qi_cols, sensitive) AS TABLE
    SELECT CAST(min(distinct_sensitive) AS BIGINT) AS l,
           min(entropy_l) AS entropy_l,
           count(*) AS classes,
           CAST(coalesce(sum(class_size), 0) AS BIGINT) AS records
    FROM anon__classes_sensitive(tbl, qi_cols, sensitive);

-- anon_risk(tbl, qi_cols) -> one row of prosecutor re-identification risk: max_risk
-- (1 / smallest class size), avg_risk (classes / records, the mean risk over records),
-- records_at_max_risk (share of records in classes of the smallest size).
-- anon_risk(tbl, qi_cols, k_threshold) -> also records_at_risk: the share of records in
-- classes smaller than k_threshold (individual risk above 1 / k_threshold).
CREATE OR REPLACE TEMP MACRO anon_risk(tbl, qi_cols) AS TABLE (
    SELECT 1.0 / min(__anon_n) AS max_risk,
           count(*) / sum(__anon_n) AS avg_risk,
           sum(__anon_n) FILTER (WHERE __anon_n = __anon_min) / sum(__anon_n) AS records_at_max_risk
    FROM (SELECT __anon_n, min(__anon_n) OVER () AS __anon_min FROM anon__sizes(tbl, qi_cols))
),
(tbl, qi_cols, k_threshold) AS TABLE (
    SELECT 1.0 / min(__anon_n) AS max_risk,
           count(*) / sum(__anon_n) AS avg_risk,
           sum(__anon_n) FILTER (WHERE __anon_n = __anon_min) / sum(__anon_n) AS records_at_max_risk,
           coalesce(sum(__anon_n) FILTER (WHERE __anon_n < k_threshold), 0) / sum(__anon_n)
               AS records_at_risk
    FROM (SELECT __anon_n, min(__anon_n) OVER () AS __anon_min FROM anon__sizes(tbl, qi_cols))
);

-- anon_suppress(tbl, qi_cols, k) -> the rows of tbl (all columns) whose equivalence
-- class has at least k rows, i.e. tbl with the classes that violate k-anonymity removed.
CREATE OR REPLACE TEMP MACRO anon_suppress(tbl, qi_cols, k) AS TABLE
    SELECT * EXCLUDE (__anon_n)
    FROM (
        SELECT *,
               count(*) OVER (PARTITION BY struct_pack(*COLUMNS(lambda c: anon__in(qi_cols, c))))
                   AS __anon_n
        FROM query(anon__from(tbl))
        WHERE (SELECT ok FROM anon__check(tbl, qi_cols))
    )
    WHERE __anon_n >= k;

-- anon__lower(x, width, origin) -> origin + floor((x - origin) / width) * width, exact for
-- integers and DECIMALs (modulo, not division; NULL instead of a division by zero).
CREATE OR REPLACE TEMP MACRO anon__lower(x, width, origin) AS
    x - ((((x - origin) % nullif(width, 0)) + width) % nullif(width, 0));

-- anon_interval(x, width) -> the interval of width `width` holding x as text
-- '[lower, upper)' (duckanon's notation of a half-open range) with lower = floor(x / width)
-- * width (inclusive) and upper = lower + width (exclusive): anon_interval(32, 5) =
-- '[30, 35)', anon_interval(-3, 5) = '[-5, 0)'. Unlike the labels of a hierarchy (see
-- anon_hierarchy_intervals), its numbers are not zero-padded to sort as text.
-- anon_interval(x, width, origin) -> the same with the interval grid shifted to start
-- at origin: lower = origin + floor((x - origin) / width) * width.
-- NULL in -> NULL out; width <= 0 raises an error. Exact for integers and DECIMALs (use
-- DECIMAL, not DOUBLE, for widths such as 0.1).
CREATE OR REPLACE TEMP MACRO anon_interval(x, width) AS
    CASE
        WHEN width <= 0 THEN error('anon_interval: width must be > 0')
        WHEN x IS NULL OR width IS NULL THEN NULL
        ELSE '[' || anon__num(anon__lower(x, width, 0))
             || ', ' || anon__num(anon__lower(x, width, 0) + width) || ')'
    END,
(x, width, origin) AS
    CASE
        WHEN width <= 0 THEN error('anon_interval: width must be > 0')
        WHEN x IS NULL OR width IS NULL OR origin IS NULL THEN NULL
        ELSE '[' || anon__num(anon__lower(x, width, origin))
             || ', ' || anon__num(anon__lower(x, width, origin) + width) || ')'
    END;

-- anon_redact(s, n) -> s as text with its last n characters replaced by '*', keeping
-- its length: anon_redact(47677, 2) = '476**'; n >= length redacts everything, n <= 0
-- changes nothing; NULL s or n -> NULL.
-- anon_redact(s, n, mask) -> the same with each redacted character replaced by mask.
-- anon__redact(s, n, mask) -> anon_redact(s, n, mask) (a macro cannot call its own overload).
CREATE OR REPLACE TEMP MACRO anon__redact(s, n, mask) AS
    CASE
        WHEN n IS NULL THEN NULL
        ELSE left(CAST(s AS VARCHAR), greatest(length(CAST(s AS VARCHAR)) - greatest(n, 0), 0))
             || repeat(mask, least(greatest(n, 0), length(CAST(s AS VARCHAR))))
    END;
CREATE OR REPLACE TEMP MACRO anon_redact(s, n) AS anon__redact(s, n, '*'),
(s, n, mask) AS anon__redact(s, n, mask);

-- ---------------------------------------------------------------------------------------
-- Hierarchy builders. Each returns a hierarchy as duckanon stores it: one row per distinct
-- non-NULL value, VARCHAR columns level_0 (the value's text, as data values are matched)
-- to level_<height> ('*'), rows in the order the Python builder of the same name lists
-- them. Store one for duckanon with CREATE TABLE (after .read duckanon_catalog.sql, which
-- creates schema anon):
--   CREATE OR REPLACE TABLE anon.hierarchy_age AS
--       SELECT * FROM anon_hierarchy_intervals('patients', 'age', [5, 10, 20]);
-- The policy names it 'age'. At most 32 levels.
-- ---------------------------------------------------------------------------------------

-- anon__levels(l) -> a struct of the 32 fields level_0 .. level_31 holding l's elements
-- (NULL past its end); unnest() it and keep the first n with anon__is_level(c, n).
CREATE OR REPLACE TEMP MACRO anon__levels(l) AS
    CASE
        WHEN len(l) > 32 THEN error('duckanon: a hierarchy has at most 32 levels, not ' || len(l))
        ELSE struct_pack(
        level_0 := l[1],
        level_1 := l[2],
        level_2 := l[3],
        level_3 := l[4],
        level_4 := l[5],
        level_5 := l[6],
        level_6 := l[7],
        level_7 := l[8],
        level_8 := l[9],
        level_9 := l[10],
        level_10 := l[11],
        level_11 := l[12],
        level_12 := l[13],
        level_13 := l[14],
        level_14 := l[15],
        level_15 := l[16],
        level_16 := l[17],
        level_17 := l[18],
        level_18 := l[19],
        level_19 := l[20],
        level_20 := l[21],
        level_21 := l[22],
        level_22 := l[23],
        level_23 := l[24],
        level_24 := l[25],
        level_25 := l[26],
        level_26 := l[27],
        level_27 := l[28],
        level_28 := l[29],
        level_29 := l[30],
        level_30 := l[31],
        level_31 := l[32])
    END;

-- anon__is_level(c, n) -> true when column name c is one of level_0 .. level_<n - 1>.
CREATE OR REPLACE TEMP MACRO anon__is_level(c, n) AS
    list_contains(list_transform(range(n), lambda i: 'level_' || i), c);

-- anon__values(tbl, col) -> one row per distinct non-NULL value __anon_v of column col of
-- tbl (a column that is not there is the binder's error naming it and the candidates).
CREATE OR REPLACE TEMP MACRO anon__values(tbl, col) AS TABLE
    SELECT DISTINCT __anon_v
    FROM query('SELECT ' || CASE WHEN col IS NULL THEN error('duckanon: no column name given')
                                 ELSE anon__ident(col) END
               || ' AS __anon_v FROM ' || anon__name(tbl))
    WHERE __anon_v IS NOT NULL;

-- anon__fixed(x) -> abs(x) as text with six decimals ('2.500000'): the digits a label shows.
CREATE OR REPLACE TEMP MACRO anon__fixed(x) AS CAST(CAST(abs(x) AS DECIMAL(38, 6)) AS VARCHAR);

-- anon__decimals(x) -> how many decimals x shows (at most six): 2.5 -> 1, 5 -> 0.
CREATE OR REPLACE TEMP MACRO anon__decimals(x) AS length(rtrim(split_part(anon__fixed(x), '.', 2), '0'));

-- anon__bound(x, digits, decimals, signed) -> x written as duckanon writes the bounds of a
-- column's labels (duckanon.notation): zero-padded to `digits` integer digits, `decimals`
-- decimals, and a sign place ('-', or '0') when the column has negative bounds (`signed`),
-- so that the labels sort as text in numeric order: anon__bound(5, 2, 0, false) = '05'.
CREATE OR REPLACE TEMP MACRO anon__bound(x, digits, decimals, signed) AS
    CASE WHEN x < 0 THEN '-' WHEN signed THEN '0' ELSE '' END
    || lpad(split_part(anon__fixed(x), '.', 1), CAST(digits AS INTEGER), '0')
    || CASE WHEN decimals > 0 THEN '.' || left(split_part(anon__fixed(x), '.', 2), CAST(decimals AS INTEGER)) ELSE '' END;

-- anon__hierarchy_intervals(tbl, col, widths, origin) -> anon_hierarchy_intervals(tbl, col, widths, origin).
-- Every level's grid spans the coarsest level's intervals around the values, from `first`
-- to `last`; the bounds of all labels are written alike (anon__bound) with the integer
-- digits of the largest bound and the decimals of `first` or of a width, whichever shows
-- more (first + width shows a width's last decimal when first shows fewer).
CREATE OR REPLACE TEMP MACRO anon__hierarchy_intervals(tbl, col, widths, origin) AS TABLE
    SELECT COLUMNS(lambda c: anon__is_level(c, len(widths) + 2))
    FROM (SELECT unnest(anon__levels(__anon_l)), __anon_v FROM (
        SELECT [CAST(__anon_v AS VARCHAR)]
                   || list_transform(widths, lambda w:
                          '[' || anon__bound(anon__lower(__anon_v, w, origin), __anon_digits, __anon_decimals,
                                             __anon_signed)
                          || ', ' || anon__bound(anon__lower(__anon_v, w, origin) + w, __anon_digits,
                                                 __anon_decimals, __anon_signed) || ')')
                   || ['*'] AS __anon_l,
               __anon_v
        FROM (
            SELECT __anon_v,
                   length(split_part(anon__fixed(greatest(abs(__anon_first), abs(__anon_last))), '.', 1))
                       AS __anon_digits,
                   greatest(anon__decimals(__anon_first),
                            list_max(list_transform(widths, lambda w: anon__decimals(w)))) AS __anon_decimals,
                   __anon_first < 0 AS __anon_signed
            FROM (
                SELECT __anon_v,
                       anon__lower(min(__anon_v) OVER (), widths[-1], origin) AS __anon_first,
                       anon__lower(max(__anon_v) OVER (), widths[-1], origin) + widths[-1] AS __anon_last
                FROM anon__values(tbl, col)
            )
        )
        WHERE CASE
                  WHEN widths IS NULL OR len(widths) = 0
                      THEN error('anon_hierarchy_intervals: give at least one interval width')
                  WHEN len(list_filter(widths, lambda w: w IS NULL OR w <= 0)) > 0
                      THEN error('anon_hierarchy_intervals: interval widths must be positive, got '
                                 || CAST(widths AS VARCHAR))
                  WHEN len(list_filter(range(2, len(widths) + 1),
                                       lambda i: widths[i] % widths[i - 1] <> 0)) > 0
                      THEN error('anon_hierarchy_intervals: widths must nest (each a multiple of the '
                                 || 'one before), got ' || CAST(widths AS VARCHAR))
                  ELSE true
              END
    ))
    ORDER BY __anon_v;

-- anon_hierarchy_intervals(tbl, col, widths) -> the interval hierarchy of the numbers in
-- column col, as Hierarchy.intervals(values, widths=widths): level i (1 .. len(widths))
-- holds each value's interval of width widths[i] as '[lo, hi)' (lo <= value < hi, lo a
-- multiple of the width), then '*'. The bounds of all labels are written alike, zero-padded
-- so that they sort as text in numeric order: '[05, 10)', '[10, 20)'. Widths are
-- positive and nest (each a multiple of the one before), e.g. [5, 10, 20].
-- anon_hierarchy_intervals(tbl, col, widths, origin) -> the same with the intervals
-- counted from origin (Hierarchy.intervals(..., origin=origin)).
CREATE OR REPLACE TEMP MACRO anon_hierarchy_intervals(tbl, col, widths) AS TABLE (
    SELECT * FROM anon__hierarchy_intervals(tbl, col, widths, 0)
),
(tbl, col, widths, origin) AS TABLE (
    SELECT * FROM anon__hierarchy_intervals(tbl, col, widths, origin)
);

-- anon_hierarchy_redaction(tbl, col, height) -> the redaction hierarchy of the values of
-- column col: level i (1 .. height - 1) masks the last i characters with '*'
-- (anon_redact(value, i)), level height is '*'. With height the longest value's length
-- (SELECT max(length(CAST(col AS VARCHAR))) FROM tbl) it is Hierarchy.redaction(values);
-- a smaller height masks fewer characters before '*'; a larger one is an error (levels of
-- only masks).
-- anon_hierarchy_redaction(tbl, col, height, mask) -> the same masking with mask
-- (Hierarchy.redaction(values, mask=mask)).
-- anon__hierarchy_redaction(tbl, col, height, mask) -> anon_hierarchy_redaction(tbl, col, height, mask).
CREATE OR REPLACE TEMP MACRO anon__hierarchy_redaction(tbl, col, height, mask) AS TABLE
    SELECT COLUMNS(lambda c: anon__is_level(c, height + 1))
    FROM (SELECT unnest(anon__levels(__anon_l)), __anon_t FROM (
        SELECT list_transform(range(height), lambda i: anon__redact(__anon_t, i, mask)) || ['*'] AS __anon_l,
               __anon_t
        FROM (
            SELECT CAST(__anon_v AS VARCHAR) AS __anon_t,
                   max(length(CAST(__anon_v AS VARCHAR))) OVER () AS __anon_longest
            FROM anon__values(tbl, col)
        )
        WHERE CASE
                  WHEN height IS NULL OR height < 1 OR height <> trunc(height)
                      THEN error('anon_hierarchy_redaction: height must be a whole number of at least 1, got '
                                 || coalesce(CAST(height AS VARCHAR), 'NULL'))
                  WHEN height > __anon_longest
                      THEN error('anon_hierarchy_redaction: height ' || height || ' exceeds the longest value''s '
                                 || 'length ' || __anon_longest || ': its top levels would mask every character')
                  ELSE true
              END
    ))
    ORDER BY __anon_t;
CREATE OR REPLACE TEMP MACRO anon_hierarchy_redaction(tbl, col, height) AS TABLE (
    SELECT * FROM anon__hierarchy_redaction(tbl, col, height, '*')
),
(tbl, col, height, mask) AS TABLE (
    SELECT * FROM anon__hierarchy_redaction(tbl, col, height, mask)
);

-- anon__code_text(x) -> a top or bottom code as Hierarchy.top_bottom writes it: 10 for 10.0, 2.5 for 2.5.
CREATE OR REPLACE TEMP MACRO anon__code_text(x) AS
    CASE WHEN x = trunc(x) THEN CAST(CAST(x AS BIGINT) AS VARCHAR) ELSE CAST(CAST(x AS DOUBLE) AS VARCHAR) END;

-- anon_hierarchy_top_bottom(tbl, col, bottom, top) -> top and bottom coding of the numbers in
-- column col as a level, as Hierarchy.top_bottom(values, bottom=bottom, top=top): the value,
-- then the value itself from bottom to top, '< bottom' below and '> top' above, then '*'.
-- A NULL bottom or top codes one side only. The codes' typed bounds in a release are the
-- smallest and largest values under them: build it over the public domain (a table of
-- every possible value) when the data's extremes are secret.
CREATE OR REPLACE TEMP MACRO anon_hierarchy_top_bottom(tbl, col, bottom, top) AS TABLE
    SELECT COLUMNS(lambda c: anon__is_level(c, 3))
    FROM (SELECT unnest(anon__levels(__anon_l)), __anon_v FROM (
        SELECT [CAST(__anon_v AS VARCHAR),
                CASE WHEN __anon_v < bottom THEN '< ' || anon__code_text(bottom)
                     WHEN __anon_v > top THEN '> ' || anon__code_text(top)
                     ELSE CAST(__anon_v AS VARCHAR) END,
                '*'] AS __anon_l,
               __anon_v
        FROM anon__values(tbl, col)
        WHERE CASE
                  WHEN bottom IS NULL AND top IS NULL
                      THEN error('anon_hierarchy_top_bottom: give a top code, a bottom code, or both')
                  WHEN bottom >= top
                      THEN error('anon_hierarchy_top_bottom: the bottom code ' || bottom
                                 || ' must lie below the top code ' || top)
                  ELSE true
              END
    ))
    ORDER BY __anon_v;

-- anon_hierarchy_dates(tbl, col) -> the date hierarchy of column col (DATE, TIMESTAMP or
-- ISO text), as Hierarchy.dates(values): the value, month '2020-03', year '2020', decade
-- '2020-2029', '*'. For a DATE column it equals Hierarchy.dates; for a TIMESTAMP column
-- level_0 is the timestamp's text, as data values are matched.
CREATE OR REPLACE TEMP MACRO anon_hierarchy_dates(tbl, col) AS TABLE
    SELECT COLUMNS(lambda c: anon__is_level(c, 5))
    FROM (SELECT unnest(anon__levels(__anon_l)), __anon_v FROM (
        SELECT [CAST(__anon_v AS VARCHAR),
                strftime(__anon_d, '%Y-%m'),
                lpad(CAST(year(__anon_d) AS VARCHAR), 4, '0'),
                lpad(CAST(year(__anon_d) - year(__anon_d) % 10 AS VARCHAR), 4, '0') || '-'
                    || lpad(CAST(year(__anon_d) - year(__anon_d) % 10 + 9 AS VARCHAR), 4, '0'),
                '*'] AS __anon_l,
               __anon_v
        FROM (SELECT __anon_v, CAST(__anon_v AS DATE) AS __anon_d FROM anon__values(tbl, col))
    ))
    ORDER BY __anon_v;

-- anon__group_label(vals, first, last) -> the label of the group vals[first .. last]:
-- 'first..last', or the value itself for a group of one.
CREATE OR REPLACE TEMP MACRO anon__group_label(vals, first, last) AS
    CASE WHEN first = last THEN vals[first] ELSE vals[first] || '..' || vals[last] END;

-- anon_hierarchy_ordered_groups(ordered_values, sizes) -> the hierarchy of categories
-- grouped in the given order, as Hierarchy.ordered_groups(ordered_values, sizes=sizes):
-- level 1 groups sizes[1] values, level 2 groups sizes[2] level-1 groups, and so on, then
-- '*'; a group is labelled 'first..last' (or its only value). Sizes are whole numbers of
-- at least 2; values are listed once each, e.g.
-- anon_hierarchy_ordered_groups(['Preschool', '1st-4th', '5th-6th', '7th-8th'], [2]).
CREATE OR REPLACE TEMP MACRO anon_hierarchy_ordered_groups(ordered_values, sizes) AS TABLE
    SELECT COLUMNS(lambda c: anon__is_level(c, len(sizes) + 2))
    FROM (SELECT unnest(anon__levels(__anon_l)), __anon_i FROM (
        SELECT [__anon_v]
                   || list_transform(__anon_spans, lambda span: anon__group_label(__anon_all,
                          (__anon_i - 1) // span * span + 1,
                          least((__anon_i - 1) // span * span + span, len(__anon_all))))
                   || ['*'] AS __anon_l,
               __anon_i
        FROM (
            SELECT unnest(__anon_all) AS __anon_v, generate_subscripts(__anon_all, 1) AS __anon_i,
                   __anon_all, __anon_spans
            FROM (
                SELECT list_transform(ordered_values, lambda v: CAST(v AS VARCHAR)) AS __anon_all,
                       list_transform(range(1, len(sizes) + 1),
                                      lambda j: CAST(list_aggregate(sizes[1:j], 'product') AS BIGINT))
                           AS __anon_spans
            )
            WHERE CASE
                      WHEN ordered_values IS NULL OR len(ordered_values) = 0
                          THEN error('anon_hierarchy_ordered_groups: no categories to group')
                      WHEN len(list_distinct(__anon_all)) <> len(__anon_all)
                           OR list_contains(__anon_all, NULL)
                          THEN error('anon_hierarchy_ordered_groups: categories listed twice or NULL: '
                                     || CAST(list_filter(__anon_all, lambda v: v IS NULL
                                            OR len(list_filter(__anon_all, lambda w: w = v)) > 1) AS VARCHAR))
                      WHEN sizes IS NULL OR len(sizes) = 0
                           OR len(list_filter(sizes, lambda s: s IS NULL OR s < 2 OR s <> trunc(s))) > 0
                          THEN error('anon_hierarchy_ordered_groups: group sizes must be whole numbers of at '
                                     || 'least 2, got ' || coalesce(CAST(sizes AS VARCHAR), 'NULL'))
                      ELSE true
                  END
        )
    ))
    ORDER BY __anon_i;

-- ---------------------------------------------------------------------------------------
-- Declaring a policy: the rows duckanon's Anonymizer.save_policy writes, for a database
-- whose catalog exists (.read duckanon_catalog.sql). One policy is three INSERTs (four with column methods):
--   INSERT INTO anon.policies SELECT * FROM anon_policy('patients_k5', suppression_limit := 0.02);
--   INSERT INTO anon.policy_columns SELECT * FROM anon_policy_columns('patients_k5',
--       MAP {'age': 'age', 'zip': 'zip'}, identifiers := ['name'], sensitive := ['disease']);
--   INSERT INTO anon.policy_models SELECT * FROM anon_policy_models('patients_k5', [
--       anon_model('k-anonymity', {'k': 5}),
--       anon_model('distinct-l-diversity', {'sensitive': 'disease', 'l': 3})]);
-- A policy that releases columns transformed adds their methods (see anon_pseudonym):
--   INSERT INTO anon.policy_methods SELECT * FROM anon_policy_methods('patients_k5',
--       MAP {'email': anon_mask_email_domain()});
-- Each refuses a policy that already has rows in its table; to declare one again, first
--   DELETE FROM anon.policies WHERE name = 'patients_k5';
--   DELETE FROM anon.policy_columns WHERE policy = 'patients_k5';
--   DELETE FROM anon.policy_models WHERE policy = 'patients_k5';
--   DELETE FROM anon.policy_methods WHERE policy = 'patients_k5';
-- duckanon checks every value when it reads the policy (duckanon.connect(con).policy(name),
-- duckanon run DB --policy NAME) and names the policy and the value at fault.
-- ---------------------------------------------------------------------------------------

-- anon__undeclared(policy, tbl) -> true; an error when table anon.<tbl> already holds rows
-- of policy `policy` (in its column name or policy). The table is looked up when a
-- macro using this runs, not when duckanon.sql is read (which works without the catalog):
-- DuckDB binds a table name that depends on no argument at once, so the name is joined
-- with an empty piece of `policy`.
CREATE OR REPLACE TEMP MACRO anon__undeclared(policy, tbl) AS
    CASE
        WHEN policy IS NULL THEN error('duckanon: a policy needs a name')
        WHEN EXISTS (SELECT 1
                     FROM (SELECT COLUMNS(lambda c: c IN ('name', 'policy'))
                           FROM query('SELECT * FROM anon.' || tbl || left(CAST(policy AS VARCHAR), 0)))
                          AS __anon_rows(__anon_policy)
                     WHERE __anon_policy = policy)
            THEN error('duckanon: policy ' || policy || ' already has rows in anon.' || tbl
                       || '; delete its rows from anon.policies, anon.policy_columns, '
                       || 'anon.policy_models and anon.policy_methods to declare it again')
        ELSE true
    END;

-- anon_policy(policy) -> the row of anon.policies declaring policy `policy`: suppression,
-- suppression_limit, max_suppressed and others as duckanon.Policy's arguments of those
-- names, given by name, e.g. anon_policy('p', suppression := 'drop', suppression_limit :=
-- 0.05). Defaults as Policy's: suppression 'replace' (or 'drop', 'replace-unchecked'); suppression_limit the
-- share of records that may be suppressed, 0 (1 when max_suppressed is given);
-- max_suppressed a number of records, none; others 'error' (or 'drop', 'insensitive':
-- what happens to columns given no role).
CREATE OR REPLACE TEMP MACRO anon_policy(policy, suppression := 'replace', suppression_limit := NULL,
                                         max_suppressed := NULL, others := 'error') AS TABLE
    SELECT CAST(policy AS VARCHAR) AS name,
           CAST(suppression AS VARCHAR) AS suppression,
           CASE
               WHEN suppression_limit IS NOT NULL THEN CAST(suppression_limit AS VARCHAR)
               -- unset, as Policy: no share limit beyond max_suppressed when that is given
               WHEN max_suppressed IS NULL THEN '0.0'
               ELSE '1.0'
           END AS suppression_limit,
           CAST(max_suppressed AS VARCHAR) AS max_suppressed,
           CAST(others AS VARCHAR) AS others,
           strftime(make_timestamp(epoch_us(get_current_timestamp())), '%Y-%m-%dT%H:%M:%S.%f') || '+00:00'
               AS created
    WHERE anon__undeclared(policy, 'policies');

-- anon_policy_columns(policy, quasi_identifiers) -> the rows of anon.policy_columns giving
-- each column its role: quasi_identifiers maps each quasi-identifier to the name of its
-- stored hierarchy (table anon.hierarchy_<name>), or to NULL for none (Mondrian and
-- clustering only), e.g. MAP {'age': 'age', 'zip': 'zip'}. Named lists add the other
-- roles: identifiers := [...] (dropped), sensitive := [...] (released as they are,
-- protected by the models naming them), insensitive := [...] (released as they are),
-- pseudonymize := [...], mask := [...], date_shift := [...] (released transformed by the
-- method anon_policy_methods gives them; a pseudonymized column without one is hashed
-- under a random key per release); person := 'column' makes the policy count people
-- (an extra row of role 'person': k over people's signatures, suppression by person).
CREATE OR REPLACE TEMP MACRO anon_policy_columns(policy, quasi_identifiers,
                                                 identifiers := CAST([] AS VARCHAR[]),
                                                 sensitive := CAST([] AS VARCHAR[]),
                                                 insensitive := CAST([] AS VARCHAR[]),
                                                 pseudonymize := CAST([] AS VARCHAR[]),
                                                 mask := CAST([] AS VARCHAR[]),
                                                 date_shift := CAST([] AS VARCHAR[]),
                                                 person := CAST(NULL AS VARCHAR)) AS TABLE
    SELECT CAST(policy AS VARCHAR) AS policy, column_name, role, hierarchy_table
    FROM (
        SELECT 1 AS __anon_role, unnest(identifiers) AS column_name, 'identifier' AS role,
               CAST(NULL AS VARCHAR) AS hierarchy_table, generate_subscripts(identifiers, 1) AS __anon_i
        UNION ALL
        SELECT 2, __anon_e.key, 'quasi-identifier', 'hierarchy_' || __anon_e.value, __anon_i
        FROM (SELECT unnest(map_entries(quasi_identifiers)) AS __anon_e,
                     generate_subscripts(map_entries(quasi_identifiers), 1) AS __anon_i)
        UNION ALL
        SELECT 3, unnest(sensitive), 'sensitive', NULL, generate_subscripts(sensitive, 1)
        UNION ALL
        SELECT 4, unnest(insensitive), 'insensitive', NULL, generate_subscripts(insensitive, 1)
        UNION ALL
        SELECT 5, unnest(pseudonymize), 'pseudonymize', NULL, generate_subscripts(pseudonymize, 1)
        UNION ALL
        SELECT 6, unnest(mask), 'mask', NULL, generate_subscripts(mask, 1)
        UNION ALL
        SELECT 7, unnest(date_shift), 'date-shift', NULL, generate_subscripts(date_shift, 1)
        UNION ALL
        SELECT 8, person, 'person', NULL, 1 WHERE person IS NOT NULL
    )
    WHERE anon__undeclared(policy, 'policy_columns')
    ORDER BY __anon_role, __anon_i;

-- Column methods, as anon_policy_methods takes them (duckanon.recode.protect); each is the
-- method's parameters as JSON text.
-- anon_pseudonym(key := NULL) -> keyed HMAC-SHA-256 of the value's text; key 'env:NAME' (an
-- environment variable) or 'file:PATH', at least 32 bytes; NULL: a random key per release.
-- The key itself never goes in the database.
CREATE OR REPLACE TEMP MACRO anon_pseudonym(key := NULL) AS
    CAST(to_json({'key': CAST(key AS VARCHAR)}) AS VARCHAR);
-- anon_mask(pattern, keep, padding := '*') -> the value matched as a whole by `pattern`: the
-- groups numbered in `keep` shown, the others as `padding`, text outside groups left out; a
-- value the pattern does not match shows as `padding` alone.
CREATE OR REPLACE TEMP MACRO anon_mask(pattern, keep, padding := '*') AS
    CAST(to_json({'pattern': CAST(pattern AS VARCHAR), 'keep': CAST(keep AS INTEGER[]),
                  'padding': CAST(padding AS VARCHAR)}) AS VARCHAR);
-- anon_mask_email_domain(padding := '*') -> jane@example.org shown as *@example.org.
CREATE OR REPLACE TEMP MACRO anon_mask_email_domain(padding := '*') AS
    anon_mask('([^@]+)(@[^@]+)', [2], padding := padding);
-- anon_mask_keep_last(characters, padding := '*') -> the last characters shown (a phone
-- number's last digits); shorter values fully masked.
CREATE OR REPLACE TEMP MACRO anon_mask_keep_last(characters, padding := '*') AS
    anon_mask('(.+)(.{' || CAST(characters AS VARCHAR) || '})', [2], padding := padding);
-- anon_mask_keep_first(characters, padding := '*') -> the first characters shown.
CREATE OR REPLACE TEMP MACRO anon_mask_keep_first(characters, padding := '*') AS
    anon_mask('(.{' || CAST(characters AS VARCHAR) || '})(.+)', [1], padding := padding);
-- anon_date_shift(days, person, key := NULL) -> each person's dates (the person named by
-- column `person`, the Python method's `by`) moved by one offset in [-days, days], drawn
-- from the keyed hash of the person (key as anon_pseudonym's).
CREATE OR REPLACE TEMP MACRO anon_date_shift(days, person, key := NULL) AS
    CAST(to_json({'days': CAST(days AS INTEGER), 'by': CAST(person AS VARCHAR), 'key': CAST(key AS VARCHAR)})
         AS VARCHAR);

-- anon_policy_methods(policy, methods) -> the rows of anon.policy_methods: methods maps each
-- column of role pseudonymize, mask or date-shift to its method, e.g.
--   MAP {'email': anon_mask_email_domain(), 'visit': anon_date_shift(30, 'patient_id')}
CREATE OR REPLACE TEMP MACRO anon_policy_methods(policy, methods) AS TABLE
    SELECT CAST(policy AS VARCHAR) AS policy, __anon_e.key AS column_name, __anon_e.value AS params
    FROM (SELECT unnest(map_entries(methods)) AS __anon_e, generate_subscripts(map_entries(methods), 1) AS __anon_i)
    WHERE anon__undeclared(policy, 'policy_methods')
    ORDER BY __anon_i;

-- anon_model(name, params) -> one privacy model as anon_policy_models takes it: name is
-- one of duckanon's models and params a struct of its Python constructor's arguments:
--   anon_model('k-anonymity', {'k': 5})
--   anon_model('distinct-l-diversity', {'sensitive': 'disease', 'l': 3})
--   anon_model('entropy-l-diversity', {'sensitive': 'disease', 'l': 2.5})
--   anon_model('recursive-cl-diversity', {'sensitive': 'disease', 'c': 3, 'l': 2})
--   anon_model('alpha-k-anonymity', {'sensitive': 'disease', 'alpha': 0.5, 'k': 5})
--       (optionally 'highly_sensitive': ['hiv'])
--   anon_model('p-sensitive-k-anonymity', {'sensitive': 'disease', 'p': 2, 'k': 5})
--   anon_model('t-closeness', {'sensitive': 'disease', 't': 0.2, 'distance': 'equal'})
--       (distance 'ordered', or 'hierarchical' with 'hierarchy': anon_hierarchy_rows('disease'))
--   anon_model('alpha-l-diversity-k-anonymity', {'sensitive': 'disease', 'alpha': 0.6, 'l': 2,
--       'k': 5, 'levels': MAP {'flu': 1, 'hiv': 3}})
--   anon_model('basic-beta-likeness', {'sensitive': 'disease', 'beta': 1.0})
--   anon_model('enhanced-beta-likeness', {'sensitive': 'disease', 'beta': 1.0})
--   anon_model('delta-disclosure-privacy', {'sensitive': 'disease', 'delta': 1.5})
--   anon_model('k-map', {'k': 5, 'population_size': 8000000})
--       (optionally 'significance': 0.05, 'estimator': 'poisson'; k-map estimated as ARX does; or,
--       counted in a population table the source is a sample of: {'k': 5, 'population': 'voters'})
--   anon_model('delta-presence', {'delta_min': 0.05, 'delta_max': 0.15, 'population': 'voters'})
--       (optionally 'arx_size_first': true: checked after the class-size bound, as ARX orders it)
--   anon_model('average-reidentification-risk', {'threshold': 0.05})
--       (optionally 'highest_risk': 0.2, 'records_at_risk': 0.01, both or neither)
--   anon_model('sample-uniqueness', {'threshold': 0.01})
--   anon_model('population-uniqueness', {'threshold': 0.01, 'population_size': 8000000})
--       (optionally 'estimator': 'dankar' | 'pitman' | 'zayatz' | 'snb', 'solver_steps': 1000)
--   Risk thresholds bound a figure of all the classes together; the smallest classes are
--   suppressed until it holds.
--   anon_model('no-attack-profitability-prosecutor', {'adversary_gain': 1200, 'adversary_cost': 2})
--   anon_model('no-attack-profitability-journalist', {'adversary_gain': 1200, 'adversary_cost': 2,
--                                                    'population': 'voters'})
--       (no attack pays: classes of more than gain/cost records, or population records, as ARX)
--   anon_model('profitability-prosecutor', {'adversary_gain': 1200, 'adversary_cost': 2,
--                                           'publisher_loss': 300, 'publisher_benefit': 1200})
--   anon_model('profitability-journalist', {... the same four ..., 'population': 'voters'})
--       (a class is kept only where releasing it pays the publisher, as ARX's models with an attack)
--   anon_model('ed-differential-privacy', {'epsilon': 1.0, 'delta': 1e-5})
--       (optionally 'steps': 100, 'search_epsilon': 0.1, 'k_rule': 'arx'; (epsilon, delta)-differential
--       privacy by SafePub, alone, over quasi-identifiers only, declared with anon_policy('p',
--       suppression := 'drop', suppression_limit := 1); released by duckanon run, which samples the source)
CREATE OR REPLACE TEMP MACRO anon_model(name, params) AS
    CASE
        WHEN name IS NULL OR NOT list_contains(['k-anonymity', 'distinct-l-diversity', 'entropy-l-diversity',
                'recursive-cl-diversity', 'alpha-k-anonymity', 'p-sensitive-k-anonymity', 't-closeness',
                'alpha-l-diversity-k-anonymity', 'basic-beta-likeness', 'enhanced-beta-likeness',
                'delta-disclosure-privacy', 'k-map', 'delta-presence', 'average-reidentification-risk',
                'sample-uniqueness', 'population-uniqueness', 'no-attack-profitability-prosecutor',
                'no-attack-profitability-journalist', 'profitability-prosecutor', 'profitability-journalist',
                'ed-differential-privacy'], name)
            THEN error('duckanon: unknown privacy model ' || coalesce(name, 'NULL') || '; known: k-anonymity, '
                       || 'distinct-l-diversity, entropy-l-diversity, recursive-cl-diversity, alpha-k-anonymity, '
                       || 'p-sensitive-k-anonymity, t-closeness, alpha-l-diversity-k-anonymity, '
                       || 'basic-beta-likeness, enhanced-beta-likeness, delta-disclosure-privacy, k-map, '
                       || 'delta-presence, average-reidentification-risk, sample-uniqueness, '
                       || 'population-uniqueness, no-attack-profitability-prosecutor, '
                       || 'no-attack-profitability-journalist, profitability-prosecutor, profitability-journalist, '
                       || 'ed-differential-privacy')
        ELSE struct_pack(model := CAST(name AS VARCHAR),
                         sensitive := json_extract_string(to_json(params), '$.sensitive'),
                         params := CAST(to_json(params) AS VARCHAR))
    END;

-- anon_hierarchy_rows(name) -> the rows of stored hierarchy `name` (table
-- anon.hierarchy_<name>) as a list of lists of level values, as t-closeness's
-- hierarchical distance takes them: anon_model('t-closeness', {'sensitive': 'disease',
-- 't': 0.2, 'distance': 'hierarchical', 'hierarchy': anon_hierarchy_rows('disease')}).
CREATE OR REPLACE TEMP MACRO anon_hierarchy_rows(name) AS
    (SELECT list(list_value(*COLUMNS(*)))
     FROM query(anon__from('anon."hierarchy_' || replace(name, '"', '""') || '"')));

-- anon_policy_models(policy, models) -> the rows of anon.policy_models: the privacy models
-- of policy `policy`, a list of anon_model(...) values, numbered in their order.
CREATE OR REPLACE TEMP MACRO anon_policy_models(policy, models) AS TABLE
    SELECT CAST(policy AS VARCHAR) AS policy, CAST(__anon_i - 1 AS VARCHAR) AS position,
           __anon_m.model AS model, __anon_m.sensitive AS sensitive, __anon_m.params AS params
    FROM (SELECT unnest(models) AS __anon_m, generate_subscripts(models, 1) AS __anon_i)
    WHERE anon__undeclared(policy, 'policy_models')
    ORDER BY __anon_i;

-- ---------------------------------------------------------------- verifying a release
-- anon_verify(release) -> one row per guarantee a duckanon release claims: guarantee,
-- claimed (what its release_info says), recomputed (what its rows give), holds. `release`
-- is the released table of a DuckDB release (open the file: `duckdb -readonly
-- release.duckdb`, or ATTACH it and name 'alias.table'; its release_info is read beside
-- it) or the path of a Parquet release ('release.parquet'). Everything is recomputed here
-- from the rows, independently of duckanon and of the views the release carries: the
-- content digest (its definition is in duckanon/release/digest.py), the record count, the
-- classes and the smallest class, the suppression (of people, for a policy that counts them), the
-- signatures of a policy that counts people (each shared by k people), and the models k-anonymity, k-map, distinct,
-- entropy and recursive (c,l)-diversity, (alpha,k)-anonymity, p-sensitive k-anonymity, basic and
-- enhanced beta-likeness, delta-disclosure privacy and t-closeness with the equal distance
-- (against the released distribution; under suppression
-- 'replace-unchecked', ARX's semantics, the '*' class is left out of the models; under a policy with strata,
-- every model holds within each stratum, its classes and the distribution it compares with the stratum's). The ordered and
-- hierarchical distances and alpha-l-diversity-k-anonymity need the values' types or a
-- hierarchy, and entropy l-diversity with Grassberger's estimator its correction table:
-- they show holds = NULL here; a DuckDB release's own view
-- release_verification recomputes them. delta-presence and k-map counted in a population
-- table need that table, which no release holds: holds = NULL here and in the view. Rows
-- are compared as text (CAST AS VARCHAR). A release of cell suppression (its policy says
-- missing_matches_any) counts, for each distinct key, the records compatible with it, a
-- missing value matching any value: those are its class and its size.

-- anon__first_size(estimator) -> the smallest size the estimator models: 0 (Poisson), 1 (zero-truncated).
CREATE OR REPLACE TEMP MACRO anon__first_size(estimator) AS CASE WHEN estimator = 'poisson' THEN 0 ELSE 1 END;

-- anon__estimated_share(m, mean, estimator) -> P(X <= m) for X Poisson with this mean, zero-truncated unless
-- estimator is 'poisson': the sum of exp(j ln mean - mean - lgamma(j + 1)) from the first size to m.
CREATE OR REPLACE TEMP MACRO anon__estimated_share(m, mean, estimator) AS
    list_sum(list_transform(range(anon__first_size(estimator), m + 1),
                            lambda j: exp(j * ln(mean) - mean - lgamma(j + 1))))
    / CASE WHEN estimator = 'poisson' THEN 1 ELSE 1 - exp(-mean) END;

-- anon__derived_k(k, n, population, significance, estimator) -> the class size estimated k-map enforces on n
-- records sampled from a population of that size, as duckanon's KMap (and ARX's KMap) derive it: with mean
-- k * n / population, the least m (from 0 for 'poisson', else from 1) whose Poisson (or zero-truncated Poisson)
-- cumulative probability reaches 1 - significance, looked for up to k - 1, plus 2 (or 1); at most k and n.
CREATE OR REPLACE TEMP MACRO anon__derived_k(k, n, population, significance, estimator) AS
    least(k, n, coalesce(list_filter(range(anon__first_size(estimator), k),
                                     lambda m: anon__estimated_share(m, k * n / population, estimator)
                                               >= 1 - significance)[1], k - 1)
                + CASE WHEN estimator = 'poisson' THEN 2 ELSE 1 END);

-- anon__literal(s) -> s as a SQL string literal.
CREATE OR REPLACE TEMP MACRO anon__literal(s) AS '''' || replace(s, '''', '''''') || '''';

-- anon__is_parquet(release) -> whether `release` names a Parquet file rather than a table.
CREATE OR REPLACE TEMP MACRO anon__is_parquet(release) AS lower(release) LIKE '%.parquet';

-- anon__key(name) -> the JSON path of the object key `name` (quoted: any column name is a key).
CREATE OR REPLACE TEMP MACRO anon__key(name) AS '$."' || replace(name, '"', '\"') || '"';

-- anon__release_rows(release) -> the text query() runs to read the released rows, every column as VARCHAR.
CREATE OR REPLACE TEMP MACRO anon__release_rows(release) AS
    'SELECT COLUMNS(*)::VARCHAR FROM '
    || CASE WHEN anon__is_parquet(release) THEN 'read_parquet(' || anon__literal(release) || ')'
            ELSE anon__name(release) END;

-- anon__release_info(release) -> the text query() runs to read the release's info as one JSON object `info`
-- (a Parquet release keeps it in the file's key/value metadata, '' for NULL).
CREATE OR REPLACE TEMP MACRO anon__release_info(release) AS
    CASE WHEN anon__is_parquet(release)
         THEN 'SELECT json_group_object(decode(key), nullif(decode(value), '''')) AS info FROM parquet_kv_metadata('
              || anon__literal(release) || ')'
         ELSE 'SELECT to_json(i) AS info FROM '
              || array_to_string(list_append(regexp_extract_all(anon__name(release), '"(?:[^"]|"")*"')[:-2],
                                             anon__ident('release_info')), '.') || ' AS i'
    END;

CREATE OR REPLACE TEMP MACRO anon_verify(release) AS TABLE
WITH info AS (
    SELECT info, json_extract_string(info, '$.policy')::JSON AS policy FROM query(anon__release_info(release))
), quasi AS (
    SELECT coalesce(list(json_extract_string(c, '$.column')) FILTER (WHERE json_extract_string(c, '$.role') = 'quasi-identifier'), []) AS qi,
           -- A policy with strata (role 'stratum'): every model holds within each stratum, its classes and table.
           coalesce(list(json_extract_string(c, '$.column')) FILTER (WHERE json_extract_string(c, '$.role') = 'stratum'), []) AS strata,
           -- A policy that counts people names its person column (role 'person'); NULL otherwise.
           max(json_extract_string(c, '$.column')) FILTER (WHERE json_extract_string(c, '$.role') = 'person') AS person,
           -- A release of several tables names the column of each record's table (role 'record-table').
           max(json_extract_string(c, '$.column')) FILTER (WHERE json_extract_string(c, '$.role') = 'record-table')
               AS record_table
    FROM info, unnest(coalesce(json_extract(policy, '$.columns[*]'), [])) AS u(c)
), released AS (
    -- Each row as a JSON object of its values' text, in column order.
    SELECT to_json(struct_pack(*COLUMNS(*))) AS r FROM query(anon__release_rows(release))
), header AS (
    -- The columns' names, also for a release without rows (the outer join yields one row).
    SELECT array_to_string(list_transform(json_keys(to_json(struct_pack(
               *COLUMNS(lambda c: c <> '__anon_pad__')))), lambda n: length(n) || ':' || n), '') || '|' AS text
    FROM (SELECT 1 AS __anon_pad__) LEFT JOIN (SELECT * FROM query(anon__release_rows(release)) LIMIT 1) ON true
    LIMIT 1
), row_hashes AS (
    SELECT sha256(array_to_string(list_transform(json_extract_string(r, '$.*'),
               lambda v: CASE WHEN v IS NULL THEN '-' ELSE length(v) || ':' || v END), '')) AS h
    FROM released
), buckets AS (
    SELECT substr(h, 1, 3) || sha256(array_to_string(list_sort(list(h)), '')) AS bucket
    FROM row_hashes GROUP BY substr(h, 1, 3)
), digest AS (
    SELECT 'sha256:' || sha256((SELECT text FROM header)
                               || coalesce(array_to_string(list_sort(list(bucket)), ''), '')) AS value
    FROM buckets
), keyed AS (
    -- A class's key: its stratum's values, then its quasi-identifiers' (qi_key, which the '*' class shows '*' in).
    SELECT stratum, qi_key, list_concat(stratum, qi_key) AS class_key, r
    FROM (SELECT list_transform(strata, lambda q: json_extract_string(r, anon__key(q))) AS stratum,
                 list_transform(qi, lambda q: json_extract_string(r, anon__key(q))) AS qi_key, r
          FROM released, quasi)
), exact_sizes AS (
    SELECT stratum, class_key, count(*) AS n FROM keyed GROUP BY stratum, class_key
), matching AS (
    -- A release of cell suppression counts a missing value as matching any value (policy missing_matches_any).
    SELECT coalesce(json_extract_string(policy, '$.missing_matches_any') = 'true', false) AS any_value FROM info
), compatible AS (
    SELECT * FROM exact_sizes WHERE (SELECT any_value FROM matching)
), sizes AS (
    -- Per class, its records; where a missing value matches any, per distinct key the records compatible with it.
    SELECT class_key, n FROM exact_sizes WHERE NOT (SELECT any_value FROM matching)
    UNION ALL
    SELECT a.class_key, sum(b.n) AS n
    -- (within a stratum: its values match only themselves)
    FROM compatible AS a JOIN compatible AS b
         ON a.stratum IS NOT DISTINCT FROM b.stratum
            AND list_bool_and(list_transform(range(1, len(a.class_key) + 1),
                                         lambda j: a.class_key[j] IS NULL OR b.class_key[j] IS NULL
                                                   OR a.class_key[j] = b.class_key[j]))
    GROUP BY a.class_key
), described AS (
    SELECT json_extract_string(m, '$.model') AS model, json_extract_string(m, '$.sensitive') AS sensitive, json_extract(m, '$.params') AS params, i
    FROM info, unnest(coalesce(json_extract(policy, '$.models[*]'), [])) WITH ORDINALITY AS u(m, i)
), models AS (
    -- Each model with the class size it needs (k; k-map estimated from the population's size: k', derived from the
    -- sample's size; NULL for k-map counted in a population table, which no release holds).
    SELECT *, CASE WHEN model <> 'k-map' THEN CAST(json_extract_string(params, '$.k') AS BIGINT)
                   WHEN json_extract_string(params, '$.population') IS NULL THEN anon__derived_k(
                       CAST(json_extract_string(params, '$.k') AS BIGINT),
                       CAST(json_extract_string(params, '$.sample_records') AS BIGINT),
                       CAST(json_extract_string(params, '$.population_size') AS BIGINT),
                       CAST(json_extract_string(params, '$.significance') AS DOUBLE),
                       json_extract_string(params, '$.estimator')) END AS k
    FROM described
), valued AS (
    -- Per model over a sensitive attribute and released record: its class, its value and its person (if counted).
    SELECT models.i, stratum, class_key, json_extract_string(r, anon__key(models.sensitive)) AS v,
           json_extract_string(r, anon__key(quasi.person)) AS who
    FROM keyed, models, quasi WHERE models.sensitive IS NOT NULL
), cells AS (
    -- Per model, class and value: the records; under a policy that counts people, the people (each person's value
    -- once per class).
    SELECT i, stratum, class_key, v, CASE WHEN (SELECT person FROM quasi) IS NULL THEN records ELSE people END AS c
    FROM (SELECT i, stratum, class_key, v, count(*) AS records, count(DISTINCT who) AS people FROM valued GROUP BY ALL)
), table_shares AS (
    -- Per model and value, its share q of the released table (of the class's stratum, under strata): of its
    -- records, or of its people (each person's value once in the table).
    SELECT i, stratum, v, c / sum(c) OVER (PARTITION BY i, stratum) AS q
    FROM (SELECT i, stratum, v, CASE WHEN (SELECT person FROM quasi) IS NULL THEN records ELSE people END AS c
          FROM (SELECT i, stratum, v, count(*) AS records, count(DISTINCT who) AS people FROM valued GROUP BY ALL))
), shares AS (
    SELECT cells.*, c / sum(c) OVER (PARTITION BY cells.i, class_key) AS p, q
    FROM cells JOIN table_shares ON table_shares.i = cells.i AND table_shares.stratum IS NOT DISTINCT FROM cells.stratum
                                    AND table_shares.v IS NOT DISTINCT FROM cells.v
), per_class AS (
    SELECT i, class_key, sum(c) AS n, count(*) AS values_, max(p) AS top_share,
           ln(sum(c)) - sum(c * ln(c)) / sum(c) AS entropy,
           list(c ORDER BY c DESC) AS counts,
           (sum(abs(p - q)) + 1 - sum(q)) / 2 AS emd
    FROM shares GROUP BY i, class_key
), alpha_shares AS (
    SELECT i, class_key, max(CASE WHEN coalesce(json_type(json_extract(params, '$.highly_sensitive')), 'NULL') = 'NULL'
                                       OR list_contains(json_extract_string(params, '$.highly_sensitive[*]'), v)
                                  THEN p ELSE 0 END) AS bounded
    FROM shares JOIN models USING (i) GROUP BY i, class_key
), ratios AS (
    -- Per class, its values' share p against the released share q: beta-likeness's relative gains and
    -- delta-disclosure's |log2 p/q|, each model's way.
    SELECT i, class_key, max((p - q) / q) AS gain,
           max((p - q) / q - least(CAST(json_extract_string(params, '$.beta') AS DOUBLE), -ln(q))) AS enhanced_excess,
           max(abs(ln(p / q)) / ln(2)) AS disclosure
    FROM shares JOIN models USING (i) GROUP BY i, class_key
), verdicts AS (
    SELECT models.i, models.model, models.params,
           -- In a release of several tables a model over sensitive values counts each table's classes, of the tables
           -- that hold the column: not recomputed here (the view release_verification and duckanon.verify do).
           CASE WHEN models.sensitive IS NOT NULL AND (SELECT record_table FROM quasi) IS NOT NULL THEN NULL ELSE
           CASE model
               WHEN 'k-anonymity' THEN count(*) FILTER (WHERE sizes.n < models.k)
               -- SafePub's release: k-anonymity with the k its (epsilon, delta) derive, recorded beside them
               WHEN 'ed-differential-privacy' THEN count(*) FILTER (WHERE sizes.n < models.k)
               WHEN 'k-map' THEN CASE WHEN models.k IS NOT NULL THEN count(*) FILTER (WHERE sizes.n < models.k) END
               WHEN 'distinct-l-diversity' THEN count(*) FILTER (WHERE coalesce(values_, 0) < CAST(json_extract_string(params, '$.l') AS DOUBLE))
               WHEN 'entropy-l-diversity' THEN CASE WHEN json_extract_string(params, '$.estimator') IS NULL
                   THEN count(*) FILTER (
                       WHERE coalesce(entropy, 0) < ln(CAST(json_extract_string(params, '$.l') AS DOUBLE)) - 1e-9) END
               WHEN 'recursive-cl-diversity' THEN count(*) FILTER (
                   WHERE NOT counts[1] < CAST(json_extract_string(params, '$.c') AS DOUBLE)
                                         * coalesce(list_sum(counts[CAST(json_extract_string(params, '$.l') AS BIGINT):]), 0))
               WHEN 'alpha-k-anonymity' THEN count(*) FILTER (
                   WHERE sizes.n < CAST(json_extract_string(params, '$.k') AS BIGINT) OR bounded > CAST(json_extract_string(params, '$.alpha') AS DOUBLE))
               WHEN 'p-sensitive-k-anonymity' THEN count(*) FILTER (
                   WHERE sizes.n < CAST(json_extract_string(params, '$.k') AS BIGINT) OR values_ < CAST(json_extract_string(params, '$.p') AS BIGINT))
               WHEN 'basic-beta-likeness' THEN count(*) FILTER (
                   WHERE gain > CAST(json_extract_string(params, '$.beta') AS DOUBLE) + 1e-9)
               WHEN 'enhanced-beta-likeness' THEN count(*) FILTER (WHERE enhanced_excess > 1e-9)
               WHEN 'delta-disclosure-privacy' THEN count(*) FILTER (
                   WHERE disclosure >= CAST(json_extract_string(params, '$.delta') AS DOUBLE) - 1e-9)
               WHEN 't-closeness' THEN CASE WHEN coalesce(json_extract_string(params, '$.distance'), 'equal') = 'equal'
                   THEN count(*) FILTER (WHERE emd > CAST(json_extract_string(params, '$.t') AS DOUBLE) + 1e-9) END
           END END AS violating,
           count(*) AS classes
    FROM models CROSS JOIN sizes
         LEFT JOIN per_class ON per_class.i = models.i AND per_class.class_key = sizes.class_key
         LEFT JOIN alpha_shares ON alpha_shares.i = models.i AND alpha_shares.class_key = sizes.class_key
         LEFT JOIN ratios ON ratios.i = models.i AND ratios.class_key = sizes.class_key
    -- Under ARX's semantics (suppression 'replace-unchecked') the '*' class is left out of the models.
    WHERE NOT ((SELECT coalesce(json_extract_string(policy, '$.suppression'), 'replace') FROM info) = 'replace-unchecked'
               AND len(sizes.class_key) > (SELECT len(strata) FROM quasi)
               AND list_bool_and(list_transform(sizes.class_key[(SELECT len(strata) FROM quasi) + 1:],
                                                lambda x: coalesce(x = '*', false))))
    GROUP BY models.i, models.model, models.params, models.sensitive, models.k
), signed AS (
    -- A policy that counts people: each person's signature, the sorted set of the classes of their records (of
    -- (class, table) pairs in a release of several tables; the '*' class left out under 'replace-unchecked', as for
    -- the models).
    SELECT json_extract_string(r, anon__key(person)) AS who,
           list_sort(list(DISTINCT CASE WHEN record_table IS NULL THEN class_key
                                        ELSE list_append(class_key, json_extract_string(r, anon__key(record_table)))
                                   END)) AS signature
    FROM keyed, quasi
    WHERE person IS NOT NULL
      AND NOT ((SELECT coalesce(json_extract_string(policy, '$.suppression'), 'replace') FROM info) = 'replace-unchecked'
               AND len(class_key) > 0 AND list_bool_and(list_transform(class_key, lambda x: coalesce(x = '*', false))))
    GROUP BY who
), people_exposed AS (
    -- The k a signature needs: the largest of k-anonymity's, estimated k-map's k' and the models of sensitive
    -- values with a k.
    SELECT coalesce(sum(people) FILTER (WHERE people < (SELECT max(k) FROM models
                                                        WHERE model IN ('k-anonymity', 'k-map')
                                                              OR sensitive IS NOT NULL)), 0) AS exposed
    FROM (SELECT signature, count(*) AS people FROM signed GROUP BY signature)
), people_suppression AS (
    SELECT CAST(json_extract_string(policy, '$.people.suppressed') AS BIGINT) AS claimed,
           coalesce(CAST(json_extract_string(policy, '$.max_suppressed') AS BIGINT),
                    CAST(floor(CAST(json_extract_string(policy, '$.suppression_limit') AS DOUBLE)
                               * CAST(json_extract_string(policy, '$.people.source') AS BIGINT) + 1e-9) AS BIGINT), 0)
               AS allowed,
           coalesce(json_extract_string(policy, '$.suppression'), 'replace') AS mode,
           CASE WHEN json_extract_string(policy, '$.suppression') = 'drop'
                THEN CAST(json_extract_string(policy, '$.people.source') AS BIGINT)
                     - (SELECT count(DISTINCT json_extract_string(r, anon__key(person))) FROM keyed)
                ELSE (SELECT count(DISTINCT json_extract_string(r, anon__key(person))) FROM keyed
                      WHERE len(class_key) > 0 AND list_bool_and(list_transform(class_key, lambda x: x = '*')))
           END AS shown
    FROM info, quasi WHERE person IS NOT NULL
), suppression AS (
    SELECT CAST(json_extract_string(info, '$.suppressed_records') AS BIGINT) AS claimed,
           coalesce(CAST(json_extract_string(policy, '$.max_suppressed') AS BIGINT),
                    CAST(floor(CAST(json_extract_string(policy, '$.suppression_limit') AS DOUBLE)
                               * CAST(json_extract_string(info, '$.source_records') AS BIGINT)) AS BIGINT), 0) AS allowed,
           coalesce(json_extract_string(policy, '$.suppression'), 'replace') AS mode,
           CASE WHEN json_extract_string(policy, '$.suppression') = 'drop'
                THEN CAST(json_extract_string(info, '$.source_records') AS BIGINT) - (SELECT count(*) FROM released)
                ELSE (SELECT count(*) FROM keyed WHERE len(qi_key) > 0
                                                 AND list_bool_and(list_transform(qi_key, lambda x: x = '*')))
           END AS shown
    FROM info, quasi WHERE policy IS NOT NULL AND person IS NULL
)
SELECT guarantee, claimed, recomputed, holds FROM (
    SELECT 1 AS pos, 'content digest of the rows' AS guarantee, json_extract_string(info, '$.content_digest') AS claimed,
           (SELECT value FROM digest) AS recomputed, (json_extract_string(info, '$.content_digest')) = (SELECT value FROM digest) AS holds
    FROM info
    UNION ALL
    SELECT 2, 'released records', json_extract_string(info, '$.released_records'), CAST((SELECT count(*) FROM released) AS VARCHAR),
           CAST(json_extract_string(info, '$.released_records') AS BIGINT) = (SELECT count(*) FROM released)
    FROM info
    UNION ALL
    SELECT 3, 'classes', json_extract_string(info, '$.classes'), CAST((SELECT count(*) FROM sizes) AS VARCHAR),
           CAST(json_extract_string(info, '$.classes') AS BIGINT) = (SELECT count(*) FROM sizes)
    FROM info, quasi WHERE len(qi) > 0
    UNION ALL
    SELECT 4, 'smallest class', json_extract_string(info, '$.smallest_class'), CAST((SELECT min(n) FROM sizes) AS VARCHAR),
           CAST(json_extract_string(info, '$.smallest_class') AS BIGINT) = (SELECT min(n) FROM sizes)
    FROM info, quasi WHERE len(qi) > 0
    UNION ALL
    SELECT 5, 'at most ' || allowed || ' records suppressed (' || mode || ')', CAST(claimed AS VARCHAR),
           CAST(shown AS VARCHAR), claimed <= allowed AND CASE WHEN mode = 'drop' THEN shown = claimed
                                                               ELSE shown >= claimed END
    FROM suppression WHERE claimed IS NOT NULL
    UNION ALL
    -- A differentially private release withholds the source's size and the records suppressed: nothing to check.
    SELECT 5, 'records suppressed (' || mode || ')', NULL, 'withheld: differential privacy releases neither the '
           || 'source''s size nor the records suppressed', TRUE
    FROM suppression WHERE claimed IS NULL
    UNION ALL
    SELECT 5, 'at most ' || allowed || ' people suppressed (' || mode || ')', CAST(claimed AS VARCHAR),
           CAST(shown AS VARCHAR), claimed <= allowed AND CASE WHEN mode = 'drop' THEN shown = claimed
                                                               ELSE shown >= claimed END
    FROM people_suppression
    UNION ALL
    SELECT 5, 'k-anonymity over people (by ' || person || ')', '0 people exposed', exposed || ' people exposed',
           exposed = 0
    FROM people_exposed, quasi WHERE person IS NOT NULL
    UNION ALL
    SELECT 5 + i, model || ' ' || CAST(params AS VARCHAR), '0 classes violate it',
           CASE WHEN violating IS NULL AND json_extract_string(params, '$.population') IS NOT NULL
                THEN 'not recomputed: it needs the population table, which the release does not hold'
                WHEN violating IS NULL THEN 'not recomputed here: see the release''s view release_verification'
                ELSE violating || ' of ' || classes || ' classes violate it' END,
           violating = 0
    FROM verdicts
)
ORDER BY pos;
