"""Issue 7 (project folders): loading, templating, validation errors with file and line — no Spark needed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlglot import exp

from dtables.project import ProjectError, load_project
from dtables.project.validate import validate_project

RETAIL = Path(__file__).resolve().parents[2] / "projects_example" / "retail"


@pytest.fixture
def project(tmp_path):
    target = tmp_path / "retail"
    shutil.copytree(RETAIL, target, ignore=shutil.ignore_patterns("warehouse"))
    return target


def test_retail_example_loads_with_dependencies_from_sql(project):
    p = validate_project(project)
    reads = {m.name: m.reads for m in p.dynamic_tables}
    assert reads["default.daily_revenue"] == ("default.enriched_lines",)
    assert set(reads["default.enriched_lines"]) == {"default.customers", "default.order_lines", "default.orders",
                                                   "default.products"}
    assert p.dag().topological_order()[0] == "default.enriched_lines"
    lines = p.dynamic_table("enriched_lines")
    assert lines.target_lag == "DOWNSTREAM" and "COALESCE(l.discount, 0)" in lines.query  # macro expanded
    assert "rank <= 5" in p.dynamic_table("top_customers").query  # var() from dtables.yml
    assert p.dynamic_table("daily_revenue").refresh_mode == "AUTO"  # default from dtables.yml


def test_unknown_yaml_key_names_file_line_and_key(project):
    cfg = project / "dtables.yml"
    cfg.write_text(cfg.read_text().replace("  refresh_mode: AUTO", "  refresh_mod: AUTO"))
    with pytest.raises(ProjectError, match=r"dtables.yml:6: defaults.refresh_mod: unknown key"):
        load_project(project)


def test_unknown_model_setting_names_file_and_line(project):
    (project / "models" / "daily_revenue.sql").write_text("-- target_lag: 5 minutes\n-- speed: 3\nSELECT 1 AS x\n")
    with pytest.raises(ProjectError, match=r"daily_revenue.sql:2: speed: unknown setting"):
        load_project(project)


def test_unknown_ref_and_var(project):
    (project / "models" / "broken.sql").write_text("SELECT *\nFROM {{ ref('nope') }}\n")
    with pytest.raises(ProjectError, match=r"broken.sql:2: ref\('nope'\) names nothing"):
        load_project(project)
    (project / "models" / "broken.sql").write_text("SELECT {{ var('missing') }} AS x\n")
    with pytest.raises(ProjectError, match=r"broken.sql:1: var\('missing'\) is not set"):
        load_project(project)


def test_jinja_syntax_error_has_a_line(project):
    (project / "models" / "broken.sql").write_text("SELECT 1 AS x\n{% if %}\n")
    with pytest.raises(ProjectError, match=r"broken.sql:2: template error"):
        load_project(project)


def test_unknown_table_and_column_have_lines(project):
    (project / "models" / "broken.sql").write_text("-- target_lag: 1 hour\nSELECT x\nFROM missing_table\n")
    with pytest.raises(ProjectError, match=r"broken.sql:3: unknown table missing_table"):
        validate_project(project)
    (project / "models" / "broken.sql").write_text("SELECT order_id,\n  nocol\nFROM orders\n")
    with pytest.raises(ProjectError, match=r"broken.sql:2: .*nocol"):
        validate_project(project)


def test_syntax_error_has_a_line(project):
    (project / "models" / "broken.sql").write_text("-- target_lag: 1 hour\nSELECT order_id\nFROM orders WHERE\n")
    with pytest.raises(ProjectError, match=r"broken.sql:\d+: syntax error"):
        validate_project(project)


def test_cycles_are_named(project):
    (project / "models" / "a.sql").write_text("SELECT x FROM {{ ref('b') }}\n")
    (project / "models" / "b.sql").write_text("SELECT x FROM {{ ref('a') }}\n")
    with pytest.raises(ProjectError, match=r"default.a -> default.b -> default.a|default.b -> default.a -> default.b"):
        validate_project(project)


# -- issue 22, item 3: validation linear in the length of the query --------------------------------------------------


def _depth(tree) -> int:
    deepest, todo = 0, [(tree, 1)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        todo.extend((child, depth + 1) for child in node.iter_expressions())
    return deepest


def test_a_long_sum_is_checked_on_a_tree_of_logarithmic_depth(project, monkeypatch):
    """sqlglot's scope analysis walks from every column up to its SELECT, so on the left-deep tree of ``v + v + ...``
    qualification costs terms x depth = n^2 (4,000 terms took 15 s). The tree the checker hands to sqlglot must be
    about log n deep; the check stops at once (not after minutes) when it is not."""
    from dtables.project import validate

    real_qualify = validate.qualify
    depths: list[int] = []

    def measuring_qualify(tree, **kwargs):
        depths.append(_depth(tree))
        assert depths[-1] < 100, f"the checked tree is {depths[-1]} levels deep: qualification would be quadratic"
        return real_qualify(tree, **kwargs)

    monkeypatch.setattr(validate, "qualify", measuring_qualify)
    terms = " + ".join(["quantity"] * 4000)
    (project / "models" / "long_sum.sql").write_text(f"SELECT order_id,\n  {terms} AS q\nFROM order_lines\n")
    p = validate_project(project)
    assert "long_sum" in {m.name.split(".")[1] for m in p.dynamic_tables} and max(depths) < 100
    # still checked: an unknown column in the middle of a long AND chain is found and has its line
    conditions = "\n  AND ".join(["quantity > 0"] * 500 + ["nocol = 1"] + ["quantity > 0"] * 500)
    (project / "models" / "long_sum.sql").write_text(f"SELECT order_id\nFROM order_lines\nWHERE {conditions}\n")
    with pytest.raises(ProjectError, match=r"long_sum.sql:503: .*nocol"):
        validate_project(project)


def test_regrouping_a_long_chain_keeps_its_columns_and_types():
    from dtables.project.validate import shallow
    from dtables.sql.dialect import parse_one
    from sqlglot.optimizer.annotate_types import annotate_types
    from sqlglot.optimizer.qualify import qualify

    schema = {"default": {"t": {"i": "INT", "d": "DECIMAL(10, 2)", "s": "STRING"}}}
    query = ("SELECT " + " + ".join(["i"] * 40 + ["d"] * 40) + " AS n, " + " || ".join(["s"] * 90) + " AS c, "
             + " AND ".join(["i > 0"] * 90) + " AS b FROM t")

    def typed(tree):
        out = annotate_types(qualify(tree, schema=schema, dialect="spark", db="default"), schema=schema,
                             dialect="spark")
        return [(s.alias_or_name, s.type.sql("spark")) for s in out.selects]

    def leaves(tree):
        return [c.sql() for c in tree.find_all(exp.Column, exp.Literal, bfs=False)]

    regrouped = shallow(parse_one(query))
    assert _depth(regrouped) < 20 < _depth(parse_one(query))
    assert leaves(regrouped) == leaves(parse_one(query))  # same operands, same order
    assert typed(regrouped) == typed(parse_one(query))
    assert shallow(parse_one("SELECT i + i + i AS n FROM t")).sql() == "SELECT i + i + i AS n FROM t"  # short: as is


def test_a_stored_query_is_qualified_regrouped_and_keeps_its_written_shape():
    """Issue 22 item 3, the CREATE side: qualify_sources regroups long chains while sqlglot qualifies (linear, not
    quadratic) and gives the stored query back exactly as qualifying the written tree gives it."""
    from sqlglot.optimizer.qualify_tables import qualify_tables

    from dtables.dynamic.definition import qualify_sources
    from dtables.sql.chains import regrouped
    from dtables.sql.dialect import parse_one

    query = ("SELECT " + " + ".join(f"t.v{i}" for i in range(150)) + " AS x, f(" + " * ".join(["w"] * 100)
             + ") AS y, (" + " OR ".join(f"a{i} > 0" for i in range(70)) + ") AND b FROM t JOIN u ON "
             + " AND ".join(f"t.a{i} = u.b{i}" for i in range(100)))
    written = qualify_tables(parse_one(query), db="default", dialect="spark")
    stored, sources = qualify_sources(parse_one(query))
    assert repr(stored) == repr(written) and sources == ("default.t", "default.u")
    tree = parse_one(query)
    with regrouped(tree) as shallow_tree:
        assert _depth(shallow_tree) < 30 < _depth(parse_one(query))
    assert repr(tree) == repr(parse_one(query))  # the written shape again, node for node


# -- issue 22, item 2: project files checked by the same code as SQL ------------------------------------------------


@pytest.mark.parametrize("stem", ["..x", "a`b", "a;b", "a b", "café", ".hidden", "1abc", "a.b.c", "select"])
def test_model_file_names_must_be_sql_identifiers(project, stem):
    (project / "models" / f"{stem}.sql").write_text("SELECT 1 AS x\n")
    with pytest.raises(ProjectError) as refused:
        validate_project(project)
    assert f"{stem}.sql: model name" in str(refused.value)


def test_source_and_stream_names_must_be_sql_identifiers(project):
    (project / "sources" / "more.sql").write_text("CREATE TABLE `two words` (i INT);\n")
    (project / "streams").mkdir(exist_ok=True)
    (project / "streams" / "s.sql").write_text("CREATE STREAM `s;drop` ON TABLE orders;\n")
    with pytest.raises(ProjectError) as refused:
        validate_project(project)
    assert "more.sql:1: source table name 'two words' is not a SQL identifier" in str(refused.value)
    assert "s.sql:1: stream name 's;drop' is not a SQL identifier" in str(refused.value)


BAD_LAGS = ["soon", "-5 minutes", "0 seconds", "1000 years"]


@pytest.mark.parametrize("lag", BAD_LAGS)
def test_target_lags_sql_refuses_are_refused_in_dtables_yml_and_headers(project, lag):
    from dtables.sql.dynamic_syntax import SettingError, target_lag

    with pytest.raises(SettingError) as in_sql:  # what CREATE DYNAMIC TABLE checks its TARGET_LAG with
        target_lag(lag)
    cfg = project / "dtables.yml"
    original = cfg.read_text()
    cfg.write_text(original.replace("target_lag: 5 minutes", f"target_lag: {lag}"))
    with pytest.raises(ProjectError) as in_yml:
        validate_project(project)
    assert str(in_yml.value) == f"{cfg}:5: defaults.target_lag: {in_sql.value}"
    cfg.write_text(original)
    model = project / "models" / "daily_revenue.sql"
    model.write_text(model.read_text().replace("-- target_lag: 5 minutes", f"-- refresh_mode: full\n-- target_lag: '{lag}'"))
    with pytest.raises(ProjectError) as in_header:
        validate_project(project)
    assert str(in_header.value) == f"{model}:2: target_lag: {in_sql.value}"


def test_refresh_mode_and_initialize_read_as_sql_reads_them(project):
    from dtables.sql.dialect import parse_one
    from sqlglot.errors import ParseError

    model = project / "models" / "daily_revenue.sql"
    query = model.read_text()
    model.write_text("-- refresh_mode: incremental\n-- initialize: on_schedule\n-- comment: it's daily\n" + query)
    spec = validate_project(project).dynamic_table("daily_revenue")  # any case, as in SQL
    assert (spec.refresh_mode, spec.initialize) == ("INCREMENTAL", "ON_SCHEDULE")
    assert parse_one(spec.create_statement()).args["comment"].name == "it's daily"  # quoted, not spliced
    with pytest.raises(ParseError) as in_sql:
        parse_one("CREATE DYNAMIC TABLE d TARGET_LAG = '1 hour' REFRESH_MODE = sometimes AS SELECT 1")
    model.write_text("-- refresh_mode: sometimes\n" + query)
    with pytest.raises(ProjectError) as in_file:
        validate_project(project)
    assert str(in_file.value) == f"{model}:1: refresh_mode: {in_sql.value.errors[0]['description']}"


def test_spark_settings_take_numbers_and_booleans_as_spark_reads_them() -> None:
    from dtables.project.config import parse_config

    config = parse_config("name: p\nspark:\n  master: spark://h:7077\n  conf:\n    spark.sql.shuffle.partitions: 64\n"
                          "    spark.sql.adaptive.enabled: false\n    spark.memory.fraction: 0.5\n"
                          "    spark.app.name: x\n", "dtables.yml")
    assert config.spark.conf == {"spark.sql.shuffle.partitions": "64", "spark.sql.adaptive.enabled": "false",
                                 "spark.memory.fraction": "0.5", "spark.app.name": "x"}
    with pytest.raises(ProjectError, match="spark"):
        parse_config("name: p\nspark:\n  conf:\n    spark.x: [1, 2]\n", "dtables.yml")
