"""config.toml validation, key-path errors, environment overrides and channel overrides."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest

from bot.cli import main
from tierbot.config import Config, load_config, validate_config
from tierbot.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.toml"
    p.write_text(text)
    return p


def test_shipped_config_documents_every_default() -> None:
    """The root config.toml is valid and states exactly the built-in defaults."""
    shipped = load_config(ROOT / "config.toml", environ={})
    assert shipped.model_dump() == Config().model_dump()
    data = tomllib.loads((ROOT / "config.toml").read_text())

    def keys(d: dict, prefix: str = "") -> set[str]:
        out = set()
        for k, v in d.items():
            out |= keys(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k}
        return out

    expected = keys(Config().model_dump(exclude={"channels"}))
    assert expected <= keys(data), f"undocumented keys: {sorted(expected - keys(data))}"


def test_misordered_thresholds_name_the_key_and_both_values(tmp_path: Path) -> None:
    """An aggressive threshold below background is rejected with the key path and values."""
    p = write(tmp_path, "[defaults.compaction]\naggressive_threshold = 0.75\n")
    with pytest.raises(ConfigError) as err:
        load_config(p, environ={})
    assert str(err.value) == (
        f"{p}: defaults.compaction.aggressive_threshold: must be > background_threshold (0.80), "
        "got 0.75"
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[defaults]\ncontext_windw = 1000\n", "defaults.context_windw: unknown key"),
        ('[defaults]\ncontext_window = "big"\n', "defaults.context_window: input should be"),
        ("[defaults.compaction]\nbackground_fraction = 1.5\n", "background_fraction"),
        ('[llm]\nprovider = "gpt"\n', "llm.provider"),
        (
            "[[channels]]\nmatch = 'x:*'\n[channels.compaction]\nemergency_threshold = 0.5\n",
            "channels[0].compaction.emergency_threshold: must be > aggressive_threshold",
        ),
        ("[defaults\n", "invalid TOML"),
    ],
)
def test_config_check_exits_2_with_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    """`tierbot config check` on a broken file exits 2 and names the offending key."""
    p = write(tmp_path, text)
    assert main(["config", "check", "--config", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err
    assert str(p) in err
    assert len(err.splitlines()) == 1


def test_config_check_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A valid file, in an environment that can run it, prints ok naming it and exits 0."""
    assert main(["config", "check", "--config", str(ROOT / "config.toml")]) == 0
    assert capsys.readouterr().out.strip() == f"ok: {ROOT / 'config.toml'}"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            '[defaults]\ncontext_window = "32000"\n',
            "defaults.context_window: input should be a valid integer, got '32000' "
            "(write a number, unquoted)",
        ),
        (
            '[runtime]\ndrain_seconds = "5"\n',
            "runtime.drain_seconds: input should be a valid number, got '5' "
            "(write a number, unquoted)",
        ),
        (
            '[adapters.console]\nenabled = "yes"\n',
            "adapters.console.enabled: input should be a valid boolean, got 'yes' "
            "(write true or false, unquoted)",
        ),
        (
            "[[channels]]\nmatch = 'x:*'\n[channels.compaction]\nnotice = 1\n",
            "channels[0].compaction.notice: input should be a valid boolean, got 1",
        ),
    ],
    ids=["quoted int", "quoted float", "quoted bool", "int for a bool"],
)
def test_quoted_numbers_and_booleans_are_refused_not_coerced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, line: str
) -> None:
    """A TOML string (or 1) where a number or boolean belongs is refused by key path, exit 2."""
    p = write(tmp_path, text)
    assert main(["config", "check", "--config", str(p)]) == 2
    assert capsys.readouterr().err.strip() == f"{p}: {line}"


def test_environment_overrides_stay_typed_under_strict_values() -> None:
    """An override is one TOML value: 4000 and true keep working; a bare yes is a string."""
    env = {"TIERBOT__DEFAULTS__CONTEXT_WINDOW": "4000", "TIERBOT__OPS__ENABLED": "true"}
    cfg = load_config(None, environ=env | {"TIERBOT__RUNTIME__DRAIN_SECONDS": "3"})
    assert (cfg.defaults.context_window, cfg.ops.enabled, cfg.runtime.drain_seconds) == (
        4000,
        True,
        3.0,
    )
    with pytest.raises(ConfigError) as err:
        load_config(None, environ={"TIERBOT__OPS__ENABLED": "yes"})
    assert str(err.value) == (
        "<defaults>: ops.enabled: input should be a valid boolean, got 'yes' (write true or "
        "false, unquoted) (from environment variable TIERBOT__OPS__ENABLED)"
    )


@pytest.mark.parametrize(
    ("embedder", "what"),
    [("sentence-transformers", "the path of a local model folder"), ("openai", "a model name")],
)
def test_embedder_without_a_model_is_named_once_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], embedder: str, what: str
) -> None:
    """`run` with an embedder but no embedder_model exits 2 naming the key once, before the
    store (or anything else) is created."""
    p = write(
        tmp_path,
        f'[storage]\npath = "{tmp_path / "emb.db"}"\n[memory]\nembedder = "{embedder}"\n',
    )
    assert main(["run", "--config", str(p)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"{p}: memory.embedder_model: required for embedder {embedder!r} ({what}), got ''"
    )
    assert [f.name for f in tmp_path.iterdir()] == ["config.toml"]
    off = load_config(
        None, environ={"TIERBOT__MEMORY__ENABLED": "false", "TIERBOT__MEMORY__EMBEDDER": embedder}
    )
    assert off.memory.embedder == embedder  # memory off: nothing to embed with


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is not None,
    reason="needs sentence-transformers to be missing",
)
def test_missing_sentence_transformers_names_the_key_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the optional extra, `run` exits 2 with one line naming memory.embedder once,
    before the store (or anything else) is created."""
    p = write(
        tmp_path,
        f'[storage]\npath = "{tmp_path / "emb.db"}"\n[adapters.console]\nenabled = false\n'
        f'[memory]\nembedder = "sentence-transformers"\nembedder_model = "{tmp_path}"\n',
    )
    assert main(["run", "--config", str(p)]) == 2
    assert [f.name for f in tmp_path.iterdir()] == ["config.toml"]
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"{p}: memory.embedder: sentence-transformers is not installed")
    assert line.count("memory.embedder") == 1


def test_environment_overrides_any_key(tmp_path: Path) -> None:
    """TIERBOT__SECTION__KEY overrides the file, parsed as a TOML value."""
    p = write(tmp_path, "[llm]\nprovider = 'offline'\n")
    cfg = load_config(
        p,
        environ={
            "TIERBOT__LLM__PROVIDER": "openai",
            "TIERBOT__DEFAULTS__COMPACTION__BACKGROUND_THRESHOLD": "0.7",
            "TIERBOT__ADAPTERS__DISCORD__ADMINS": '["42"]',
        },
    )
    assert cfg.llm.provider == "openai"
    assert cfg.defaults.compaction.background_threshold == 0.7
    assert cfg.adapters.discord.admins == ["42"]


def test_bad_environment_override_names_the_variable(tmp_path: Path) -> None:
    """A bad override is reported with its key path and the variable that set it."""
    with pytest.raises(ConfigError) as err:
        load_config(None, environ={"TIERBOT__DEFAULTS__CONTEXT_WINDOW": "tiny"})
    assert "defaults.context_window" in str(err.value)
    assert "TIERBOT__DEFAULTS__CONTEXT_WINDOW" in str(err.value)


def test_most_specific_channel_override_wins() -> None:
    """Overrides apply by pattern; the most specific match wins over a broader one."""
    cfg = validate_config(
        {
            "channels": [
                {"match": "slack:T1:C9", "context_window": 4000},
                {
                    "match": "slack:*",
                    "context_window": 8000,
                    "respond": "mention",
                    "compaction": {"background_threshold": 0.7},
                },
            ]
        },
        "test",
    )
    exact = cfg.for_channel("slack:T1:C9")
    assert exact.context_window == 4000
    assert exact.compaction.background_threshold == 0.7
    assert cfg.for_channel("slack:T1:C1").context_window == 8000
    assert cfg.for_channel("discord:1:2").context_window == 32000
    assert cfg.respond_for("slack:T1:C9") == "mention"
    assert cfg.respond_for("discord:1:2") == "mention"  # the Discord adapter's default
    assert cfg.respond_for("console:local") == "always"


def test_secrets_are_named_not_stored() -> None:
    """Credentials are configured as environment variable names only."""
    cfg = Config()
    assert cfg.adapters.discord.token_env == "DISCORD_TOKEN"
    assert not hasattr(cfg.llm, "api_key")


def test_branch_and_worker_keys_at_their_old_place_still_work_and_name_the_new_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config written before [defaults.branches] and [defaults.task_workers] existed keeps
    its values; `config check` warns once per old key, naming the key to write instead."""
    old = write(
        tmp_path,
        "[defaults.compaction]\nmax_concurrent_branches = 0\nworker_timeout_seconds = 30\n"
        "max_overflow_retries = 4\n",
    )
    cfg = load_config(old, environ={})
    s = cfg.for_channel("any:1")
    assert s.branches.max_concurrent == 0 and s.task_workers.timeout_seconds == 30
    assert s.branches.max_overflow_retries == s.task_workers.max_overflow_retries == 4
    assert (
        "defaults.compaction.max_concurrent_branches is deprecated: write "
        "defaults.branches.max_concurrent instead"
    ) in cfg.deprecations
    assert main(["config", "check", "--config", str(old)]) == 0
    err = capsys.readouterr().err
    assert "defaults.task_workers.timeout_seconds instead" in err
    assert not load_config(ROOT / "config.toml", environ={}).deprecations


def test_a_bad_value_under_an_old_key_is_named_where_it_was_written(tmp_path: Path) -> None:
    """The error names the new key path and the deprecated key the value came from."""
    bad = write(tmp_path, "[[channels]]\nmatch = 'x:*'\ncompaction = { branch_max_turns = 0 }\n")
    with pytest.raises(ConfigError) as err:
        load_config(bad, environ={})
    text = str(err.value)
    assert "channels[0].branches.max_turns" in text
    assert "set as channels[0].compaction.branch_max_turns, deprecated" in text


def test_a_key_at_its_new_place_wins_over_the_same_key_at_its_old_place() -> None:
    cfg = validate_config(
        {
            "defaults": {
                "compaction": {"max_concurrent_workers": 1},
                "task_workers": {"max_concurrent": 7},
            }
        },
        "test",
    )
    assert cfg.for_channel("c").task_workers.max_concurrent == 7


def test_per_channel_branch_and_worker_overrides_are_derived_from_their_sections() -> None:
    """[[channels]] takes any subset of [defaults.branches] / [defaults.task_workers], with
    the same bounds, and only its channels see it."""
    cfg = validate_config(
        {"channels": [{"match": "quiet:*", "branches": {"max_concurrent": 0}}]}, "test"
    )
    assert cfg.for_channel("quiet:1").branches.max_concurrent == 0
    assert cfg.for_channel("busy:1").branches.max_concurrent == 5
    with pytest.raises(ConfigError, match=r"channels\[0\]\.task_workers\.max_segments"):
        validate_config({"channels": [{"match": "*", "task_workers": {"max_segments": 0}}]}, "t")
