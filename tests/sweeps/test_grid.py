from datetime import UTC, datetime

import pytest

from covey.store.catalog import ServedStrategy, WorkerEntry
from covey.sweeps.dataset import Sample
from covey.sweeps.errors import SweepInputError
from covey.sweeps.grid import load_grid
from covey.sweeps.scorers import Scoring
from covey.sweeps.served import check_strategies


def grid(tmp_path, text, name="g.toml"):
    path = tmp_path / name
    path.write_text(text)
    return load_grid(path)


def test_every_model_strategy_and_budget_is_a_configuration(tmp_path):
    g = grid(
        tmp_path,
        'models = ["sim", "other"]\nstrategies = ["react", {name = "single", label = "one"}]\n'
        "budgets = [{max_tokens = 100}, {max_tokens = 200, seconds = 5}]\nrepeats = 3\n",
    )
    assert len(g.configs) == 8 and g.repeats == 3
    assert g.configs[0].name == "sim/react/tok=100"
    assert "other/one/tok=200,s=5" in [c.name for c in g.configs]
    assert len({c.key for c in g.configs}) == 8


def test_defaults_are_one_react_configuration_on_the_workers_model(tmp_path):
    (config,) = grid(tmp_path, 'scorer = "exact"\n').configs
    assert (config.name, config.model, config.strategy) == ("default/react", None, "react")


def test_a_configuration_makes_the_job_of_a_sample(tmp_path):
    g = grid(
        tmp_path,
        'strategies = [{name = "single"}]\nbudgets = [{max_tokens = 500, max_call_tokens = 64, seconds = 30}]\n',
    )
    now = datetime(2030, 1, 1, tzinfo=UTC)
    spec = g.configs[0].spec(Sample(id="1", input="What is 1 + 1?"), "sw1", now)
    assert spec.strategy == "single" and spec.max_call_tokens == 64 and spec.budget.max_tokens == 500
    assert spec.budget.deadline == datetime(2030, 1, 1, 0, 0, 30, tzinfo=UTC)
    assert spec.scopes() == ["global", "sweep:sw1"]


def test_budgets_are_named_by_their_label_or_by_the_caps_that_differ_abbreviated(tmp_path):
    g = grid(
        tmp_path,
        'budgets = [{max_tokens = 20000, max_cycles = 6, seconds = 120, label = "small"},\n'
        "  {max_tokens = 1500000, max_cycles = 6, seconds = 120},\n"
        "  {max_tokens = 20000, max_cycles = 12, seconds = 120}]\n",
    )
    assert [c.name for c in g.configs] == [
        "default/react/small",
        "default/react/tok=1.5M,cyc=6",
        "default/react/tok=20k,cyc=12",
    ]
    assert "label" not in g.configs[0].spec(Sample(id="1", input="x"), "sw", datetime.now(UTC)).budget.model_dump()


def test_a_budget_label_and_a_rename_keep_the_configuration_key(tmp_path):
    a = grid(tmp_path, 'budgets = [{max_tokens = 100, label = "a"}, {max_tokens = 200}]\n').configs[0]
    b = grid(tmp_path, "budgets = [{max_tokens = 100}, {max_tokens = 200}]\n").configs[0]
    assert a.key == b.key and a.name != b.name


def test_model_params_reach_every_job_and_are_checked_by_the_spec(tmp_path):
    g = grid(tmp_path, "model_params = {temperature = 0.2, seed = 7}\n")
    spec = g.configs[0].spec(Sample(id="1", input="x"), "sw", datetime.now(UTC))
    assert spec.model_params is not None and spec.model_params.temperature == 0.2 and spec.model_params.seed == 7
    with pytest.raises(SweepInputError, match="model_params.temperature: Input should be less than or equal to 2"):
        grid(tmp_path, "model_params = {temperature = 9}\n")


def test_a_priority_reaches_every_job_and_keeps_the_configuration_key(tmp_path):
    """A sweep behind other work, or ahead of it: when its jobs run, not what they ask."""
    urgent = grid(tmp_path, 'strategies = ["react"]\npriority = 7\n').configs[0]
    assert urgent.spec(Sample(id="1", input="x"), "sw", datetime.now(UTC)).priority == 7
    plain = grid(tmp_path, 'strategies = ["react"]\n').configs[0]
    assert plain.spec(Sample(id="1", input="x"), "sw", datetime.now(UTC)).priority == 0
    assert urgent.key == plain.key


def test_a_configuration_key_survives_a_rename(tmp_path):
    a = grid(tmp_path, 'strategies = [{name = "single", label = "x"}]\n').configs[0]
    b = grid(tmp_path, 'strategies = [{name = "single", label = "y"}]\n').configs[0]
    assert a.key == b.key and a.name != b.name


def test_yaml_grids_read_as_toml_ones():
    assert load_grid("examples/arithmetic.yaml") == load_grid("examples/arithmetic.toml")


def test_a_strategy_neither_here_nor_on_the_workers_is_refused_naming_its_configuration(tmp_path):
    nope = grid(tmp_path, 'strategies = ["nope"]')  # loaded: the workers may serve it
    with pytest.raises(SweepInputError, match="g.toml: configuration default/nope: unknown strategy 'nope'; known: "):
        check_strategies(nope, "g.toml", "covey-sweeps", published=[])
    beam = ServedStrategy(name="nope", options={"type": "object", "additionalProperties": False})
    served = [WorkerEntry(worker="w@h", queues=["covey-sweeps"], tools=[], models=[], strategies=[beam])]
    check_strategies(nope, "g.toml", "covey-sweeps", published=served)
    odd = grid(tmp_path, 'strategies = [{name = "nope", options = {depth = 3}}]')
    with pytest.raises(SweepInputError, match="configuration default/nope: options: Additional properties"):
        check_strategies(odd, "g.toml", "covey-sweeps", published=served)


@pytest.mark.parametrize(
    "text, message",
    [
        ('strategies = [{name = "single", options = {depth = 3}}]', "options.depth: Extra inputs"),
        ("repeats = 0", "g.toml: repeats: Input should be greater than or equal to 1"),
        ("budgets = [{max_tokens = -1}]", "budgets.0.max_tokens:"),
        ("budgets = [{tokens = 5}]", "budgets.0.tokens: Extra inputs"),
        ("surprise = 1", "g.toml: surprise: Extra inputs"),
        ('scorer = "fuzzy"', "scorer: unknown kind 'fuzzy'"),
        ('scorer = "nowhere_module:fn"', "scorer: cannot import 'nowhere_module'"),
        ('scorer = {kind = "regex", pattern = "("}', "scorer: pattern:"),
        ('scorer = ["exact", "exact"]', "scorer: two scorers are named 'exact'"),
        ('scorer = ["exact", "model", {kind = "model", name = "judge2"}]', "scorer: at most one model judge"),
        ('scorer = ["exact", "fuzzy"]', "scorer: 1: unknown kind 'fuzzy'"),
        ("scorer = []", "scorer: List should have at least 1 item"),
        ('strategies = ["react", "react"]', "configuration default/react#2 is the same as default/react#1"),
        ("models = [", "g.toml: not valid TOML"),
        ("priority = 10", "g.toml: priority: Input should be less than or equal to 9"),
        ('priority = "high"', "g.toml: priority: Input should be a valid integer"),
    ],
)
def test_a_bad_grid_names_the_field(tmp_path, text, message):
    with pytest.raises(SweepInputError, match=message):
        grid(tmp_path, text)


def test_a_yaml_syntax_error_names_its_line(tmp_path):
    with pytest.raises(SweepInputError, match="g.yaml line 3: not valid YAML"):  # where the parser sees it
        grid(tmp_path, "models: [sim]\nstrategies: [react\nrepeats: 1\n", name="g.yaml")


def test_other_suffixes_are_refused(tmp_path):
    with pytest.raises(SweepInputError, match="name a .toml, .yaml or .yml file"):
        grid(tmp_path, "{}", name="g.json")


def test_a_sweep_name_is_checked_like_a_tenant():
    from covey.spec import InvalidSpec, JobSpec

    assert JobSpec.parse({"task": "x", "tenant": "a", "sweep": "s1"}).scopes() == ["global", "tenant:a", "sweep:s1"]
    with pytest.raises(InvalidSpec, match="sweep:"):
        JobSpec.parse({"task": "x", "sweep": "a b"})


@pytest.mark.parametrize("name, text", [("g.toml", ""), ("g.toml", "# nothing\n"), ("g.yaml", "{}\n")])
def test_an_empty_grid_is_refused(tmp_path, name, text):
    with pytest.raises(SweepInputError, match=f"{name}: empty grid: give at least strategies"):
        grid(tmp_path, text, name)


def test_a_list_of_scorers_is_accepted_the_first_being_the_primary(tmp_path):
    g = grid(tmp_path, 'scorer = ["numeric", {kind = "includes", name = "has", ignore_case = true}]\n')
    scoring = Scoring.build(g.scorers)
    assert [s.name for s in scoring.local] == ["numeric", "has"] and scoring.primary == "numeric"


def test_agents_are_configurations_beside_strategies_named_by_their_attribute(tmp_path):
    g = grid(
        tmp_path,
        'models = ["sim"]\nstrategies = ["react"]\n'
        'agents = ["mypkg.agents:triage", {path = "mypkg.other:desk", label = "v2", options = {max_turns = 3}}]\n',
    )
    assert [(c.name, c.strategy, c.agent) for c in g.configs] == [
        ("sim/react", "react", None),
        ("sim/triage", "agent", "mypkg.agents:triage"),
        ("sim/v2", "agent", "mypkg.other:desk"),
    ]
    spec = g.configs[2].spec(Sample(id="1", input="Refund A1"), "sw1", datetime(2030, 1, 1, tzinfo=UTC))
    assert (spec.strategy, spec.agent, spec.options) == ("agent", "mypkg.other:desk", {"max_turns": 3})
    assert g.configs[0].key == grid(tmp_path, 'models = ["sim"]\nstrategies = ["react"]\n', "h.toml").configs[0].key


def test_a_grid_of_agents_alone_runs_no_strategy_and_a_bad_path_is_refused_naming_it(tmp_path):
    g = grid(tmp_path, 'agents = ["mypkg.agents:a", "mypkg.agents:b"]\n')
    assert [c.name for c in g.configs] == ["default/a", "default/b"]
    with pytest.raises(SweepInputError, match="configuration default/x.y: agent: 'x.y' is not module.path:attribute"):
        grid(tmp_path, 'agents = ["x.y"]\n', "bad.toml")
    with pytest.raises(SweepInputError, match="give at least one strategy or agent"):
        grid(tmp_path, "strategies = []\n", "none.toml")
