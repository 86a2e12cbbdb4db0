"""bench/step_profile.py's sum of device time by kernel kind, on kernel names read off the first H100 profile
(2026-11-26, bench/records/gpu_check_2026-11-26_h100.json) and an aten op's row, which repeats its kernels' time."""
from types import SimpleNamespace

import torch
from absl.testing import absltest, parameterized

from bench import step_profile

CUDA, CPU = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU


def row(name, micros, device_type=CUDA):
    return SimpleNamespace(key=name, self_device_time_total=micros, device_type=device_type)


class KernelKindTest(parameterized.TestCase):

    @parameterized.parameters(
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "matmul"),
        ("fmha_cutlassB_bf16_aligned_64x64_k64_seqaligned_sm80(PyTorchMemEff", "attention, SDPA memory-efficient"),
        ("triton_per_fused__to_copy_add_embedding_dense_backward_ex_3", "embedding backward"),
        ("triton_tem_fused_0", "attention, FlexAttention (Inductor templates)"),
        ("cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x64_4x1x1_kernel0_0", "attention, cuDNN / flash"),
        ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>", "optimizer"),
        ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_12", "reductions: norms, losses, sums (Inductor)"),
        ("triton_poi_fused_gelu_mul_5", "elementwise (Inductor)"),
        ("Memcpy HtoD (Pinned -> Device)", "copies and fills"),
        ("some_unnamed_kernel", "other"),
    )
    def test_kernel_names_get_their_kind(self, name, kind):
        self.assertEqual(step_profile.kernel_kind(name), kind)

    def test_only_kernels_are_summed_largest_first_per_step(self):
        averages = [row("aten::mm", 3000, CPU), row("nvjet_sm90_a", 2000), row("nvjet_sm90_b", 1000),
                    row("triton_poi_fused_add_1", 500), row("fmha_cutlassF_bf16", 1500)]
        totals = step_profile.device_time_by_kind(averages)
        self.assertEqual(totals, {"matmul": 3000, "attention, SDPA memory-efficient": 1500,
                                  "elementwise (Inductor)": 500})
        line = step_profile.kinds_line(totals, steps=5)
        self.assertTrue(line.startswith("device time by kind, per step: matmul 0.6 ms (60.0 %), "), line)
        self.assertTrue(line.endswith("all kernels 1.0 ms"), line)


if __name__ == "__main__":
    absltest.main()
