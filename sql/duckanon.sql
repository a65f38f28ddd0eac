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

-- anon__from(tbl) -> the text 'SELECT * FROM "part"."part"' that query() runs to read the
-- table or view named tbl. A part of the name is "…" (with "" for a quote inside) or a run
-- of characters other than '.' and '"'; each part is re-quoted, so the text is only ever a
-- name. query_table(tbl) is not used: the 1.5 shell's query_table reads table ab when
-- given '"a""b"'.
CREATE OR REPLACE TEMP MACRO anon__from(tbl) AS
    CASE
        WHEN tbl IS NULL THEN error('duckanon: no table name given')
        WHEN NOT regexp_full_match(tbl, '("(?:[^"]|"")*"|[^."]+)(\.("(?:[^"]|"")*"|[^."]+))*')
            THEN error('duckanon: not a valid qualified name of a table: ' || tbl
                       || ' (quote a part holding a dot or a quote as in SQL: "my.table", "a""b")')
        ELSE 'SELECT * FROM ' || array_to_string(list_transform(
                 regexp_extract_all(tbl, '"(?:[^"]|"")*"|[^."]+'),
                 lambda p: '"' || replace(CASE WHEN p[1] = '"' THEN replace(p[2:-2], '""', '"') ELSE p END,
                                          '"', '""') || '"'), '.')
    END;

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
-- '[lower-upper)' with lower = floor(x / width) * width (inclusive) and upper = lower +
-- width (exclusive): anon_interval(32, 5) = '[30-35)', anon_interval(-3, 5) = '[-5-0)'.
-- anon_interval(x, width, origin) -> the same with the interval grid shifted to start
-- at origin: lower = origin + floor((x - origin) / width) * width.
-- NULL in -> NULL out; width <= 0 raises an error. Exact for integers and DECIMALs (use
-- DECIMAL, not DOUBLE, for widths such as 0.1).
CREATE OR REPLACE TEMP MACRO anon_interval(x, width) AS
    CASE
        WHEN width <= 0 THEN error('anon_interval: width must be > 0')
        WHEN x IS NULL OR width IS NULL THEN NULL
        ELSE '[' || anon__num(anon__lower(x, width, 0))
             || '-' || anon__num(anon__lower(x, width, 0) + width) || ')'
    END,
(x, width, origin) AS
    CASE
        WHEN width <= 0 THEN error('anon_interval: width must be > 0')
        WHEN x IS NULL OR width IS NULL OR origin IS NULL THEN NULL
        ELSE '[' || anon__num(anon__lower(x, width, origin))
             || '-' || anon__num(anon__lower(x, width, origin) + width) || ')'
    END;

-- anon_redact(s, n) -> s as text with its last n characters replaced by '*', keeping
-- its length: anon_redact(47677, 2) = '476**'; n >= length redacts everything, n <= 0
-- changes nothing; NULL s or n -> NULL.
CREATE OR REPLACE TEMP MACRO anon_redact(s, n) AS
    CASE
        WHEN n IS NULL THEN NULL
        ELSE left(CAST(s AS VARCHAR), greatest(length(CAST(s AS VARCHAR)) - greatest(n, 0), 0))
             || repeat('*', least(greatest(n, 0), length(CAST(s AS VARCHAR))))
    END;
