-- duckanon_catalog.sql: duckanon's catalog in your database, for declaring hierarchies
-- and policies from the DuckDB shell (run it once, on a database opened read-write):
--
--   duckdb people.duckdb
--   D .read /path/to/sql/duckanon.sql
--   D .read /path/to/sql/duckanon_catalog.sql
--
-- It creates schema `anon` (hierarchies are its tables hierarchy_<name>) and the four
-- policy tables exactly as duckanon.connect() does (every column VARCHAR), unless they
-- exist: reading it again changes nothing. Fill them with the macros of duckanon.sql:
-- anon_policy(), anon_policy_columns(), anon_policy_models(), anon_policy_methods().
CREATE SCHEMA IF NOT EXISTS anon;
CREATE TABLE IF NOT EXISTS anon.policies (
    name VARCHAR, suppression VARCHAR, suppression_limit VARCHAR, max_suppressed VARCHAR, others VARCHAR,
    created VARCHAR);
CREATE TABLE IF NOT EXISTS anon.policy_columns (
    policy VARCHAR, column_name VARCHAR, role VARCHAR, hierarchy_table VARCHAR);
CREATE TABLE IF NOT EXISTS anon.policy_models (
    policy VARCHAR, position VARCHAR, model VARCHAR, sensitive VARCHAR, params VARCHAR);
CREATE TABLE IF NOT EXISTS anon.policy_methods (
    policy VARCHAR, column_name VARCHAR, params VARCHAR);
