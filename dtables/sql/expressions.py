"""The expression classes of dtables' statements: what the parsers in ``dtables.sql.*_syntax`` produce, what the
dialect renders back (``dtables.sql.dialect``) and what the statement executor (``dtables.sql.executor``) dispatches
on. Plain data: no parsing and no I/O here, so every layer may import them."""

from __future__ import annotations

from sqlglot import exp

# -- tables ---------------------------------------------------------------------------------------------------------


class SetChangeTracking(exp.Expression):
    """``ALTER TABLE t SET CHANGE_TRACKING = TRUE | FALSE``."""

    arg_types = {"this": True, "enabled": True}


# -- dynamic tables -------------------------------------------------------------------------------------------------


class CreateDynamicTable(exp.Expression):
    arg_types = {"this": True, "query": True, "target_lag": True, "refresh_mode": False, "initialize": False,
                 "comment": False, "columns": False, "replace": False, "exists": False}


class AlterDynamicTable(exp.Expression):
    """``action`` is REFRESH, SUSPEND, RESUME or SET_TARGET_LAG (then ``target_lag`` holds the new lag)."""

    arg_types = {"this": True, "action": True, "target_lag": False}


class DropDynamicTable(exp.Expression):
    arg_types = {"this": True, "exists": False}


class ShowDynamicTables(exp.Expression):
    arg_types = {"like": False}


class DescribeDynamicTable(exp.Expression):
    arg_types = {"this": True}


# -- streams, transactions, VACUUM ----------------------------------------------------------------------------------


class CreateStream(exp.Expression):
    """``source_kind``: TABLE | VIEW | DYNAMIC TABLE; ``mode``: DEFAULT | APPEND_ONLY; ``at_before``: the
    ``exp.HistoricalData`` of an AT/BEFORE clause; ``flavor``: SNOWFLAKE | SINGDATA."""

    arg_types = {"this": True, "source": True, "source_kind": True, "mode": True, "show_initial_rows": True,
                 "at_before": False, "comment": False, "replace": False, "exists": False, "flavor": True}


class DropStream(exp.Expression):
    arg_types = {"this": True, "exists": False}


class ShowStreams(exp.Expression):
    arg_types = {"like": False}


class DescribeStream(exp.Expression):
    arg_types = {"this": True}


class Vacuum(exp.Expression):
    """``retain``: the hours of RETAIN n HOURS (None: the table's own retention); ``dry_run``: DRY RUN."""

    arg_types = {"this": True, "retain": False, "dry_run": False}


class BeginTransaction(exp.Expression):
    arg_types = {}


class CommitTransaction(exp.Expression):
    arg_types = {}


class RollbackTransaction(exp.Expression):
    arg_types = {}


# -- ingestion channels ---------------------------------------------------------------------------------------------


class ShowChannels(exp.Expression):
    """``like``: a LIKE pattern on channel names; ``table``: only the channels of this table; ``database``: only
    those of tables in this database."""

    arg_types = {"like": False, "table": False, "database": False}
