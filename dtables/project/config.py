"""``dtables.yml``: validated with pydantic (unknown keys are errors naming the file, line and key)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from dtables import secrets
from dtables.errors import DtablesError
from dtables.sql.dynamic_syntax import SettingError, setting

CONFIG_FILE = "dtables.yml"


class ProjectError(DtablesError):
    """A project file is invalid; the message names the file and line."""


def format_problems(problems: list[str]) -> str:
    return problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n" + "\n".join(problems)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _as_in_sql(key: str) -> AfterValidator:
    """A field read by the parser CREATE DYNAMIC TABLE uses for setting ``key``: what SQL refuses, files refuse."""

    def check(value: str) -> str:
        try:
            return setting(key, value)
        except SettingError as e:
            raise ValueError(str(e)) from e

    return AfterValidator(check)


TargetLag = Annotated[str, _as_in_sql("TARGET_LAG")]
RefreshMode = Annotated[str, _as_in_sql("REFRESH_MODE")]
Initialize = Annotated[str, _as_in_sql("INITIALIZE")]


def problem_text(error: Any) -> str:
    """The words of one pydantic error: an unknown key, the parser's own message, or pydantic's."""
    if error["type"] == "extra_forbidden":
        return "unknown key"
    if error["type"] == "value_error" and "error" in error.get("ctx", {}):
        return str(error["ctx"]["error"])
    return str(error["msg"])


def _setting_text(value: Any) -> str:
    """YAML reads `4` and `true` as a number and a boolean; Spark takes every setting as text (`true`, not `True`)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


SettingValue = Annotated[str, BeforeValidator(lambda v: _setting_text(v) if isinstance(v, (bool, int, float)) else v)]


class SparkSettings(_Strict):
    master: str | None = None
    remote: str | None = None
    conf: dict[str, SettingValue] = Field(default_factory=dict)


class Defaults(_Strict):
    target_lag: TargetLag = "1 hour"
    refresh_mode: RefreshMode = "AUTO"
    initialize: Initialize = "ON_CREATE"


class Profile(_Strict):
    warehouse: str | None = None
    state_store: str | None = None
    spark: SparkSettings | None = None
    vars: dict[str, Any] = Field(default_factory=dict)


class ProjectConfig(_Strict):
    name: str
    warehouse: str = "warehouse"
    state_store: str | None = None
    spark: SparkSettings = SparkSettings()
    defaults: Defaults = Defaults()
    vars: dict[str, Any] = Field(default_factory=dict)
    profiles: dict[str, Profile] = Field(default_factory=dict)
    profile: str | None = None

    def with_profile(self, name: str | None) -> ProjectConfig:
        """This config with a profile's settings laid over it (``dev``, ``prod``, ...)."""
        name = name or self.profile
        if not name:
            return self
        if name not in self.profiles:
            known = ", ".join(sorted(self.profiles)) or "none"
            raise ProjectError(f"{CONFIG_FILE}: unknown profile {name!r} (profiles: {known})")
        p = self.profiles[name]
        return self.model_copy(update={
            "warehouse": p.warehouse or self.warehouse,
            "state_store": p.state_store or self.state_store,
            "spark": p.spark or self.spark,
            "vars": {**self.vars, **p.vars},
            "profile": name,
        })


def _line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """The line of the YAML node at ``loc`` (a pydantic error location), 1-based."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for key in loc:
        if not isinstance(node, yaml.MappingNode):
            break
        for k, v in node.value:
            if k.value == str(key):
                line, node = k.start_mark.line + 1, v
                break
        else:
            break
    return line


def parse_config(text: str, source: str = CONFIG_FILE) -> ProjectConfig:
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ProjectError(f"{source}{where}: invalid YAML: {getattr(e, 'problem', e)}") from e
    if not isinstance(data, dict):
        raise ProjectError(f"{source}: expected a mapping of settings")
    secrets.register(secrets.secret_values(data))  # every profile's, before any error can quote one
    try:
        return ProjectConfig.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            loc = tuple(err["loc"])
            line = _line_of(text, loc)
            key = ".".join(str(x) for x in loc)
            problems.append(f"{source}{f':{line}' if line else ''}: {key}: {problem_text(err)}")
        raise ProjectError("\n".join(problems)) from e


def load_config(folder: Path, profile: str | None = None) -> ProjectConfig:
    path = folder / CONFIG_FILE
    if not path.exists():
        raise ProjectError(f"{path}: not found; is {folder} a dtables project? (`dtables init` makes one)")
    return parse_config(path.read_text(), str(path)).with_profile(profile)
