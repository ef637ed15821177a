"""The ten-minute GPU check's CPU half (issue 50): config/studies/gpu-smoke.yaml plans the whole cluster path
(two verl train jobs and two evaluate jobs on one GPU, then collect, the laws, every table and figure) on a
workstation and through the Slurm template profile; its one new key (``study.families.axis_sweeps.axes``)
moves no existing study's keys; ``axisrl model tiny`` writes a Qwen2 model that transformers loads and whose
tokenizer renders the agent loop's chat template for the preset's own tasks within its length limits; and
bench/gpu_smoke.sh stops at once, with one line, where there is no GPU. What needs verl (its override
validation, the train jobs with a scripted ``main_ppo``) is in tests/verl/test_gpu_smoke_study.py."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from test_cli_errors import axisrl, one_error_line
from transformers import AutoModelForCausalLM, AutoTokenizer

from axisrl.backends.verl.episode import AgentEpisode
from axisrl.backends.verl.launch import prompt_tokens
from axisrl.backends.verl.tiny_model import SMOKE_SHAPE, write_tiny_model
from axisrl.config import load_config, load_yaml, validate_config
from axisrl.domains import load
from axisrl.plan import plan_designs
from axisrl.stages import STAGES, study
from axisrl.targets import study_targets
from conftest import DEFAULT_CONFIG, ROOT, SCHEMA_PATH, copy_workflow, snakemake

PRESET = ROOT / "config" / "studies" / "gpu-smoke.yaml"
MATHCODE = ROOT / "config" / "studies" / "gpu-smoke-mathcode.yaml"
GPU_SMOKE = ("--configfile", "config/studies/gpu-smoke.yaml")
LOCAL = ("--cores", "8", "--resources", "gpu=1")
"""How docs/cluster.md runs the check on a workstation: Snakemake grants the jobs one GPU, so they take turns."""
STAGES_PLANNED = {"synthesize", "embed", "dedup", "plan", "train", "evaluate", "collect", "laws", "pricing", "catalog"}
GPU_RULES = {
    "train": ("8", "gpu=1", "mem_mb=64000", "runtime=30"),
    "evaluate": ("4", "gpu=1", "mem_mb=32000", "runtime=15"),
}
"""Threads and resources of the preset's GPU jobs (its ``resources`` section)."""
SCRIPT = ROOT / "bench" / "gpu_smoke.sh"
NO_GPU = "gpu_smoke: needs an NVIDIA GPU (nvidia-smi found none)"


def planned(stdout: str) -> dict[str, int]:
    """A dry run's ``Job stats`` table: jobs per rule."""
    rows = stdout.split("Job stats:")[1].strip().split("\n\n")[0].splitlines()[2:]
    return {row.split()[0]: int(row.split()[1]) for row in rows if row.split()[0] != "total"}


def jobs(stdout: str) -> list[tuple[str, str, str]]:
    """(rule, threads, resources) of every job a dry run lists (threads empty where it prints none)."""
    found = re.findall(r"^rule (\w+):\n((?:    .*\n)*?)    resources: (.*)$", stdout, flags=re.M)
    return [(rule, "".join(re.findall(r"    threads: (\d+)", body)), resources) for rule, body, resources in found]


def preset_config(*overlays: Path | dict) -> dict:
    config = load_config(DEFAULT_CONFIG, PRESET, *(o for o in overlays if isinstance(o, Path)), schema_path=SCHEMA_PATH)
    for overlay in (o for o in overlays if isinstance(o, dict)):
        config["train"]["llm"].update(overlay)
    return validate_config(config, load_yaml(SCHEMA_PATH))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return copy_workflow(tmp_path_factory.mktemp("gpu-smoke"))


@pytest.fixture(scope="module")
def dry_run(workdir) -> str:
    return snakemake(workdir, "-n", *LOCAL, *GPU_SMOKE).stdout


# ------------------------------------------------------------------------------------------- the plan


def test_the_dry_run_plans_the_whole_study_with_two_train_and_two_evaluate_jobs(dry_run, workdir):
    stats = planned(dry_run)
    assert {rule: stats[rule] for rule in ("train", "evaluate")} == {"train": 2, "evaluate": 2}
    assert set(stats) == {*STAGES_PLANNED, *study_targets(recipe=False), "all"}  # every table and figure, no base
    assert not (workdir / "results").exists()


def test_the_gpu_jobs_take_one_gpu_each_and_no_other_job_asks_for_one(dry_run):
    listed = jobs(dry_run)
    assert {rule for rule, _, _ in listed} >= set(GPU_RULES)
    for rule, threads, resources in listed:
        if rule in GPU_RULES:
            wanted_threads, *wanted = GPU_RULES[rule]
            assert threads == wanted_threads and set(wanted) <= set(resources.split(", ")), (rule, resources)
        else:
            assert "gpu=" not in resources, (rule, resources)


def test_through_the_slurm_template_profile_the_gpu_jobs_go_to_the_gpu_partition(workdir):
    """``--profile slurm`` as docs/cluster.md sets it up (the template, unedited): train and evaluate on the
    GPU partition with one GPU, every other job on the CPU partition."""
    done = snakemake(workdir, "-n", "--profile", "workflow/profiles/slurm", *GPU_SMOKE)
    listed = jobs(done.stdout)
    assert sorted(rule for rule, _, _ in listed if rule in GPU_RULES) == ["evaluate", "evaluate", "train", "train"]
    for rule, _, resources in listed:
        fields = set(resources.split(", "))
        if rule in GPU_RULES:
            assert {"slurm_partition=gpu", "gpu=1", GPU_RULES[rule][2]} <= fields, (rule, resources)
        else:
            assert "slurm_partition=cpu" in fields and "gpu=1" not in fields, (rule, resources)


def test_the_mathcode_overlay_plans_the_same_study_in_mathcode(workdir, dry_run):
    done = snakemake(workdir, "-n", *LOCAL, *GPU_SMOKE, "config/studies/gpu-smoke-mathcode.yaml")
    assert planned(done.stdout) == planned(dry_run)
    mathcode = preset_config(MATHCODE)
    assert mathcode["domain"] == "mathcode" and {
        p.design.d_env for p in study(mathcode, load_yaml(SCHEMA_PATH)).points.values()
    } == {1, 2}


def test_one_key_swaps_in_a_real_model_for_the_train_jobs_alone(workdir, schema):
    """``--config 'train={llm: {model: DIR}}'`` (docs/cluster.md) merges into the preset: the train jobs
    read the new model and get new keys; the pools and the plan keep theirs."""
    real = "/models/Qwen3-0.6B"
    tiny, swapped = study(preset_config(), schema), study(preset_config({"model": real}), schema)
    for stage in ("synthesize", "dedup", "plan"):
        assert tiny.specs[stage].key == swapped.specs[stage].key
    point = next(iter(swapped.points.values()))
    settings = STAGES["train"].settings(preset_config({"model": real}), design=point.design, seeds=point.seeds)
    assert settings["llm"]["model"] == real
    assert {p.train.key for p in tiny.points.values()}.isdisjoint(p.train.key for p in swapped.points.values())
    done = snakemake(workdir, "-n", *LOCAL, *GPU_SMOKE, "--config", f"train={{llm: {{model: {real}}}}}")
    assert set(re.findall(r"wildcards: train_key=(\w+)", done.stdout)) == {p.train.key for p in swapped.points.values()}


def test_axis_sweeps_axes_sweeps_only_the_named_axes(schema):
    config = preset_config()
    designs = plan_designs(config["study"]).values()
    assert sorted((d.design.d_env, d.design.d_task, d.design.d_traj) for d in designs) == [(1, 4, 2), (2, 4, 2)]
    assert {sweep for d in designs for sweep in d.sweeps} == {"axis_sweeps:d_env"}
    other = copy.deepcopy(config)
    other["study"]["families"]["axis_sweeps"]["axes"] = ["d_traj", "d_task"]
    designs = plan_designs(other["study"]).values()
    assert {sweep for d in designs for sweep in d.sweeps} == {"axis_sweeps:d_task", "axis_sweeps:d_traj"}
    with pytest.raises(Exception, match="axes"):
        validate_config({"study": {"families": {"axis_sweeps": {"axes": ["d_world"]}}}}, schema)


@pytest.mark.parametrize("preset", ["default", "smoke", "qwen3-8b"])
def test_the_new_axes_key_at_its_default_moves_no_key_of_an_existing_study(preset, schema):
    """Every stage key and every train and evaluate key, with the key as the schema has it and as if it had
    never been added (the schema without it, the config without it)."""
    files = [] if preset == "default" else [ROOT / "config" / "studies" / f"{preset}.yaml"]
    config = load_config(DEFAULT_CONFIG, *files, schema_path=SCHEMA_PATH)
    before = copy.deepcopy(schema)
    sweeps = before["properties"]["study"]["properties"]["families"]["properties"]["axis_sweeps"]["properties"]
    del sweeps["axes"]
    older = copy.deepcopy(config)
    del older["study"]["families"]["axis_sweeps"]["axes"]

    def keys(cfg: dict, sch: dict) -> tuple:
        jobs = study(cfg, sch)
        points = sorted((p.train.key, p.evaluate.key if p.evaluate else None) for p in jobs.points.values())
        return {name: spec.key for name, spec in jobs.specs.items()}, points

    assert keys(config, schema) == keys(older, before)
    explicit = copy.deepcopy(config)
    explicit["study"]["families"]["axis_sweeps"]["axes"] = ["d_env", "d_task", "d_traj"]
    assert keys(explicit, schema) == keys(config, schema)  # written out, the default keys nothing either


# ----------------------------------------------------------------------------------------- the tiny model


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """The model ``axisrl model tiny`` writes (the installed command, as docs/cluster.md runs it)."""
    directory = tmp_path_factory.mktemp("models") / "tiny-qwen2"
    done = axisrl("model", "tiny", str(directory))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote a tiny Qwen2ForCausalLM to {directory}: 2 layers") and not done.stderr
    return directory


def test_the_tiny_model_loads_in_transformers_and_runs_a_forward_pass(tiny_model):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert type(model).__name__ == "Qwen2ForCausalLM" and model.dtype == torch.bfloat16
    assert model.config.hidden_size // model.config.num_attention_heads == 64  # a head size GPU kernels take
    assert model.config.vocab_size == len(tokenizer) and model.config.eos_token_id == tokenizer.eos_token_id
    ids = tokenizer("<|im_start|>user\nhello<|im_end|>\n", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], len(tokenizer)) and torch.isfinite(logits).all()


def test_the_tiny_models_weights_are_seeded(tmp_path):
    first, second = (write_tiny_model(tmp_path / name, SMOKE_SHAPE, weights=True) for name in ("a", "b"))
    assert (first / "model.safetensors").read_bytes() == (second / "model.safetensors").read_bytes()
    other = write_tiny_model(tmp_path / "c", SMOKE_SHAPE, weights=True, seed=1)
    assert (other / "model.safetensors").read_bytes() != (first / "model.safetensors").read_bytes()


@pytest.mark.parametrize("domain", ["toolworld", "mathcode"])
def test_the_tokenizer_renders_the_agent_loops_chat_template_with_tools_and_a_tool_turn(domain, tiny_model):
    """As the agent loop renders an episode: the row's messages with its environment's tool schemas, then the
    model's hermes tool call and the environment's answer; the call is one ``<tool_call>`` token and its text
    parses back to the call."""
    config = preset_config(MATHCODE) if domain == "mathcode" else preset_config()
    module = load(domain)
    pool = module.generate_pool(config["synthesize"])
    task = pool.tasks[0]
    spec = next(env["spec"] for env in pool.envs if env["env_id"] == task["env_id"])
    episode = AgentEpisode.from_json(domain, spec, json.dumps(task), config["train"]["llm"]["max_tool_response_chars"])
    messages = module.render_chat(json.loads(spec), task)["messages"]
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    kwargs = {"enable_thinking": config["train"]["llm"]["enable_thinking"]}

    prompt = tokenizer.apply_chat_template(
        messages, tools=episode.tools, add_generation_prompt=True, tokenize=False, **kwargs
    )
    assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")
    assert all(json.dumps(tool, ensure_ascii=False) in prompt for tool in episode.tools)
    assert messages[-1]["content"] in prompt

    call = json.loads(task["reference"])[0]
    observation = episode.step(call["name"], call["arguments"])
    turn = [
        *messages,
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]},
        {"role": "tool", "content": observation},
    ]
    text = tokenizer.apply_chat_template(
        turn, tools=episode.tools, add_generation_prompt=True, tokenize=False, **kwargs
    )
    *_, block = re.findall(r"<tool_call>\n(.*?)\n</tool_call>", text, flags=re.S)  # the system turn's example first
    assert json.loads(block) == {"name": call["name"], "arguments": call["arguments"]}
    assert f"<tool_response>\n{observation}\n</tool_response>" in text
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert ids.count(tokenizer.convert_tokens_to_ids("<tool_call>")) == 1 + prompt.count("<tool_call>")
    assert tokenizer.decode(ids) == text  # byte-level: every text round-trips
    assert prompt_tokens(messages, episode.tools, tokenizer, kwargs) == len(
        tokenizer.encode(prompt, add_special_tokens=False)
    )


@pytest.mark.parametrize("overlays", [(), (MATHCODE,)], ids=["toolworld", "mathcode"])
def test_every_prompt_of_the_presets_pool_fits_its_limits_with_the_tiny_tokenizer(overlays, tiny_model):
    """The train job refuses a prompt over ``train.llm.max_prompt_length`` before it starts verl, so the
    preset's limits must hold its longest prompt in the tiny model's byte-level tokens."""
    config = preset_config(*overlays)
    module = load(config["domain"])
    pool = module.generate_pool(config["synthesize"])
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    specs = {env["env_id"]: json.loads(env["spec"]) for env in pool.envs + pool.heldout_envs}
    kwargs = {"enable_thinking": False}
    longest = max(
        prompt_tokens(
            module.render_chat(specs[t["env_id"]], t)["messages"],
            module.tool_schemas(specs[t["env_id"]]),
            tokenizer,
            kwargs,
        )
        for t in pool.tasks + pool.heldout_tasks
    )
    llm, engine = config["train"]["llm"], config["evaluate"]["vllm"]
    assert longest <= llm["max_prompt_length"]
    assert longest + llm["max_turns"] * engine["max_tokens"] < engine["max_model_len"]


def test_model_tiny_refuses_a_folder_that_is_not_empty_and_a_file_in_one_line(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "config.json").write_text("{}")
    assert "taken: not empty" in one_error_line(axisrl("model", "tiny", str(tmp_path / "taken")))
    (tmp_path / "file").write_text("")
    assert "file: a file, not a folder" in one_error_line(axisrl("model", "tiny", str(tmp_path / "file")))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["file", "taken"]  # nothing half-written beside them


# ------------------------------------------------------------------------------------- bench/gpu_smoke.sh


def run_script(path: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [shutil.which("bash"), str(SCRIPT)], capture_output=True, text=True, env={**os.environ, "PATH": path}
    )


def test_the_script_stops_at_once_with_one_line_where_there_is_no_nvidia_smi(tmp_path):
    done = run_script(str(tmp_path))  # an empty PATH folder: no nvidia-smi, nor anything else
    assert (done.returncode, done.stdout, done.stderr) == (2, "", NO_GPU + "\n")


def test_the_script_stops_at_once_where_nvidia_smi_finds_no_gpu(tmp_path):
    """What nvidia-smi does on a machine with its driver but no device: a message and exit status 6."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'No devices were found'\nexit 6\n")
    fake.chmod(0o755)
    done = run_script(f"{tmp_path}:{os.environ['PATH']}")
    assert (done.returncode, done.stdout, done.stderr) == (2, "", NO_GPU + "\n")
