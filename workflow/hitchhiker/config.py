"""The run configuration: one JSON schema (workflow/schemas/config.schema.yaml) for what
every environment shares, plus the configured environment's own section (a top-level key
named after it, validated by the schema fragment its class ships as ``config_schema``), one
loader.

The Snakefile validates the config with :func:`validate` before any job; the stage
commands call :func:`load` with the same schemas, so defaults and errors agree. All errors
are one line that names the key at fault.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema import validators

from hitchhiker.cli import HitchhikerError
from hitchhiker.training import objectives

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"


@functools.cache
def schema() -> dict:
    # libyaml's safe loader where PyYAML has it: the same mapping in 3 ms instead of 25, at
    # the start of every stage
    return yaml.load(SCHEMA_PATH.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _with_defaults(cls):
    # The jsonschema FAQ recipe that snakemake.utils.validate also uses: fill defaults while
    # validating, so a section given as {} comes back complete.
    validate_properties = cls.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, sch):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(name, json.loads(json.dumps(sub["default"])))
        yield from validate_properties(validator, properties, instance, sch)

    return validators.extend(cls, {"properties": set_defaults})


_Validator = _with_defaults(jsonschema.Draft202012Validator)


MOVED = {  # keys a config may still spell as they were (an environment adds its own: Environment.moved)
    "reward.unsupported_claim_penalty": "grounding.unsupported_claim_penalty",
}


def _snakemake_given_config() -> bool:
    """Whether this process is Snakemake run with --config key=value pairs (read as text)."""
    return Path(sys.argv[0]).name == "snakemake" and any(a in ("--config", "-C") for a in sys.argv)


def _describe(err: jsonschema.ValidationError, moved: dict[str, str]) -> str:
    where = ".".join(str(p) for p in err.absolute_path)
    if err.validator == "additionalProperties":
        known = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(known))
        keys = ", ".join(f"{where}.{k}" if where else k for k in extra)
        now = [moved[f"{where}.{k}"] for k in extra if f"{where}.{k}" in moved]
        if now:
            return f"config key {keys} is now {', '.join(now)}"
        return f"unknown config key {keys} (known here: {', '.join(known)})"
    if err.validator == "required":
        return f"{where or 'config'}: {err.message}"
    if err.validator == "pattern" and "x-form" in err.schema:  # a sentence instead of the regular expression
        return f"config key {where} = {json.dumps(err.instance)}: not {err.schema['x-form']}"
    if err.validator == "type" and isinstance(err.instance, str) and "." in where:
        if _snakemake_given_config():
            return (
                f"config key {where} = {json.dumps(err.instance)}: {err.message}; snakemake --config reads a nested "
                f"value as text: put nested keys in a YAML file and pass it with --configfile (README: Rerun one stage)"
            )
        return f"config key {where} = {json.dumps(err.instance)}: {err.message} (quoted in YAML, a value is text)"
    value = json.dumps(err.instance, default=str)
    if len(value) > 60:
        value = value[:57] + "..."
    return f"config key {where or '(top level)'} = {value}: {err.message}"


def validate(cfg: dict, sections: set[str] | None = None) -> dict:
    """Validate ``cfg`` in place (filling defaults) and check cross-key rules.

    ``sections`` restricts validation to a partial config, as a stage receives it.
    """
    # a whole config, or a stage that reads the environment section, checks the environment's
    # section and rules (the default environment's when none is named); other stages neither
    chosen = sections is None or "environment" in sections
    sch = schema()
    if sections is not None:
        sch = {**sch, "required": [k for k in sch["required"] if k in sections]}
    # the environment's own section (its ``section`` key: the market family shares "market"),
    # if it has one, is validated by its own schema (chosen), or passed through (a stage given
    # a whole config file that does not read it)
    name = cfg.get("environment", sch["properties"]["environment"]["default"])
    env = _environment(name) if isinstance(name, str) else None
    key = env.config_key if env is not None else None
    own = env.config_schema if env is not None and env.config_schema is not None and (chosen or key in cfg) else None
    given = set(cfg)
    section = cfg.pop(key, {}) if own is not None else None
    moved = {**MOVED, **(env.moved if env is not None else {})}
    try:
        _raise_first(sch, cfg, moved)
    finally:
        if own is not None:
            cfg[key] = section
    for extra in set(cfg) - given - set(sections or cfg):  # a section the stage neither reads nor was given:
        del cfg[extra]  # its defaults would bring rules it cannot meet
    if own is not None and chosen:
        _raise_first({"type": "object", "properties": {key: own}}, cfg, moved)
    _check_rules(cfg, chosen)
    return cfg


def drop_inherited(cfg: dict, defaults: list[Path], overlays: list[Path]) -> list[str]:
    """Remove from ``cfg`` the sections that only the default config files give
    (``defaults``: the Snakefile's configfile) and that this run's environment does not read:
    a --configfile lies over config.yaml, whose market section a weather run would otherwise
    carry. Returns the sections removed. One that an overlay gives stays, and validate
    refuses it ("unknown config key"), as it does any key the run does not read."""
    name = cfg.get("environment", schema()["properties"]["environment"]["default"])
    if not isinstance(name, str) or name not in _registry().ENVIRONMENTS:
        return []
    others = set(cfg) - set(schema()["properties"]) - {_environment(name).config_key}
    given = set()
    for path in overlays:
        given |= set(read(path))  # what --config sets cannot be a section: it reads nested values as text
    base = set()
    for path in defaults:
        base |= set(read(path))
    gone = sorted((others & base) - given)
    for key in gone:
        del cfg[key]
    return gone


def _registry():
    from hitchhiker import environments  # here: the environments import this module

    return environments


def _environment(name: str):
    return _registry().get(name)


def _raise_first(sch: dict, cfg: dict, moved: dict[str, str]) -> None:
    errors = sorted(
        _Validator(sch, format_checker=jsonschema.FormatChecker()).iter_errors(cfg),
        key=lambda e: (len(e.absolute_path), str(e.absolute_path)),
    )
    if errors:
        raise HitchhikerError(_describe(errors[0], moved))


def date_at(cfg: dict, *keys: str) -> dt.date | None:
    node: Any = cfg
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            return None
        node = node[k]
    return None if node is None else dt.date.fromisoformat(node)


def _check_rules(cfg: dict, environment: bool = True) -> None:
    """Rules a JSON schema cannot say: window order, embargo, batch shapes."""
    states = cfg.get("states", {})
    present = [sp for sp in ("train", "validation", "test") if states.get(sp)]
    for split in present:
        start, end = date_at(cfg, "states", split, "start"), date_at(cfg, "states", split, "end")
        if start and end and start > end:
            raise HitchhikerError(f"config key states.{split}: start {start} is after end {end}")
    for earlier, later in itertools.pairwise(present):
        end, start = date_at(cfg, "states", earlier, "end"), date_at(cfg, "states", later, "start")
        if end and start and start <= end:
            raise HitchhikerError(
                f"config key states.{later}.start = {start} must be after states.{earlier}.end = "
                f"{end} (the splits must follow each other: train, validation, test)"
            )
    if states.get("embargo") is not None and states["embargo"] < states.get("horizon", 1):
        raise HitchhikerError(
            f"config key states.embargo = {states['embargo']} is shorter than states.horizon = "
            f"{states['horizon']}; train outcomes would overlap the test window"
        )
    if cfg.get("evaluate", {}).get("split") == "validation" and "validation" not in present:
        raise HitchhikerError("config key evaluate.split = validation, but states.validation is not set")
    env = _environment(cfg["environment"]) if environment else None
    if cfg.get("train"):
        objectives.check(cfg, schema()["properties"]["train"]["properties"], env)
    if env is not None:
        env.check_config(cfg)
        if cfg.get("grounding", {}).get("reason_bonus") and not env.reads_reasons:
            raise HitchhikerError(
                f"config key grounding.reason_bonus = {cfg['grounding']['reason_bonus']}: the {env.name} environment "
                "does not read what a reason argues"
            )
    rollout = cfg.get("rollout", {})
    if rollout and rollout["temperature_eps"] >= rollout["temperature"]:
        raise HitchhikerError(
            f"config key rollout.temperature_eps = {rollout['temperature_eps']} must be below "
            f"rollout.temperature = {rollout['temperature']} (temperatures must stay positive)"
        )
    for key, default in (("tensor_parallel_size", 1), ("vllm_lora", False), ("vllm_cpu_kv_cache_gib", 1)):
        if rollout and rollout[key] != default and rollout["backend"] != "vllm":
            raise HitchhikerError(
                f"config key rollout.{key} = {json.dumps(rollout[key])} applies only to rollout.backend = vllm, "
                f"not {rollout['backend']}"
            )
    train = cfg.get("train", {})
    if rollout.get("each_answer") and "grounding" in cfg and not cfg["grounding"]["reason_bonus"]:
        raise HitchhikerError(
            "config key rollout.each_answer = true trains a reason only where grounding.reason_bonus pays it "
            "(its reason argues for the answer from what holds): set grounding.reason_bonus above 0"
        )
    if rollout.get("vllm_lora") and train and not train["lora"]["enabled"]:
        raise HitchhikerError(
            "config key rollout.vllm_lora = true, but train.lora.enabled = false: the policies have no adapter"
        )


def load(arg: str | Path, sections: set[str] | None = None) -> dict:
    """Load a config from a YAML file path or an inline JSON object, then validate it."""
    return validate(read(arg), sections)


def read(arg: str | Path) -> dict:
    """A config as given (a YAML file path or an inline JSON object), not yet validated."""
    text = str(arg).strip()
    if text.startswith("{"):
        try:
            cfg = json.loads(text)
        except json.JSONDecodeError as err:
            raise HitchhikerError(f"--config: not valid JSON ({err})") from None
    else:
        path = Path(text)
        if not path.is_file():
            raise HitchhikerError(f"config file {path} does not exist")
        try:
            cfg = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise HitchhikerError(f"config file {path} is not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(cfg, dict):
        raise HitchhikerError(f"config {text[:40]!r} is not a mapping of keys to values")
    return cfg


def subset(cfg: dict, sections: list[str]) -> str:
    """The JSON a Snakemake rule passes to a stage: only the sections it reads, and with the
    environment the environment's own section."""
    keys = [*sections, _environment(cfg["environment"]).config_key] if "environment" in sections else sections
    return json.dumps({k: cfg[k] for k in keys if k in cfg}, sort_keys=True)
