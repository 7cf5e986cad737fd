#include "samples/train/mlp.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "samples/train/mlp_cpu.h"
#if PINWHEEL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "samples/train/mlp_cuda.h"
#endif

namespace pinwheel::train {
namespace {

std::vector<float> RandomFloats(int64_t count, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> out(count);
  for (float& v : out) v = static_cast<float>(2.0 * rng.Uniform() - 1.0);
  return out;
}

std::vector<int64_t> RandomLabels(int64_t count, int64_t classes,
                                  uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<int64_t> out(count);
  for (int64_t& v : out) v = static_cast<int64_t>(rng.Next() % classes);
  return out;
}

TEST(RowMajorGemm, MatchesNaiveProductForEveryTranspose) {
  const int64_t m = 7, n = 9, k = 5;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 0.5f}) {
        const std::vector<float> a = RandomFloats(m * k, 1);
        const std::vector<float> b = RandomFloats(k * n, 2);
        std::vector<float> c = RandomFloats(m * n, 3);
        std::vector<double> want(m * n);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0;
            for (int64_t kk = 0; kk < k; ++kk) {
              sum += double{ta ? a[kk * m + i] : a[i * k + kk]} *
                     double{tb ? b[j * k + kk] : b[kk * n + j]};
            }
            want[i * n + j] = 2.0 * sum + beta * c[i * n + j];
          }
        }
        RowMajorGemm(ta, tb, m, n, k, 2.0f, a.data(), b.data(), beta, c.data());
        for (int64_t i = 0; i < m * n; ++i) {
          EXPECT_NEAR(c[i], want[i], 1e-5)
              << "ta=" << ta << " tb=" << tb << " beta=" << beta << " i=" << i;
        }
      }
    }
  }
}

TEST(InitialParameters, AreDeterministicAndBounded) {
  const MlpShape shape{.inputs = 16, .hidden = 8, .classes = 3};
  const std::vector<float> p = InitialParameters(shape, 42);
  EXPECT_EQ(p, InitialParameters(shape, 42));
  EXPECT_NE(p, InitialParameters(shape, 43));
  const ParameterLayout at(shape);
  ASSERT_EQ(p.size(), at.total);
  for (size_t i = at.w1; i < at.b1; ++i) EXPECT_LE(std::fabs(p[i]), 0.25f);
  for (size_t i = at.b1; i < at.w2; ++i) EXPECT_EQ(p[i], 0.0f);
}

TEST(MlpCpu, GradientMatchesFiniteDifferences) {
  const MlpShape shape{.inputs = 5, .hidden = 7, .classes = 3};
  const int64_t n = 4;
  const std::vector<float> x = RandomFloats(n * shape.inputs, 10);
  const std::vector<int64_t> y = RandomLabels(n, shape.classes, 11);
  std::vector<float> initial = InitialParameters(shape, 12);
  // Non-zero biases, so their gradients are checked away from zero too.
  const ParameterLayout at(shape);
  for (size_t i = at.b1; i < at.w2; ++i) initial[i] = 0.1f;

  // lr = 0: the step computes the gradient and leaves the parameters alone.
  auto mlp = MlpCpu::Create(shape, n, initial, {.learning_rate = 0.0f});
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  ASSERT_TRUE((*mlp)->TrainStep(x.data(), y.data(), n).ok());
  const std::vector<float> grad = (*mlp)->last_gradient();

  const float eps = 1e-3f;
  for (size_t i = 0; i < at.total; ++i) {
    std::vector<float> plus = initial, minus = initial;
    plus[i] += eps;
    minus[i] -= eps;
    auto mp = MlpCpu::Create(shape, n, plus, {});
    auto mm = MlpCpu::Create(shape, n, minus, {});
    ASSERT_TRUE(mp.ok() && mm.ok());
    const double numeric = ((*mp)->Loss(x.data(), y.data(), n) -
                            (*mm)->Loss(x.data(), y.data(), n)) /
                           (2.0 * eps);
    EXPECT_NEAR(grad[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
        << "parameter " << i;
  }
}

TEST(MlpCpu, ReportsLabelsOutOfRange) {
  const MlpShape shape{.inputs = 2, .hidden = 3, .classes = 2};
  auto mlp = MlpCpu::Create(shape, 2, InitialParameters(shape, 1), {});
  ASSERT_TRUE(mlp.ok());
  const std::vector<float> x = {1, 2, 3, 4};
  const std::vector<int64_t> y = {0, 5};
  ASSERT_TRUE((*mlp)->TrainStep(x.data(), y.data(), 2).ok());
  const auto metrics = (*mlp)->TakeMetrics();
  EXPECT_EQ(metrics.status().code(), absl::StatusCode::kInvalidArgument);
}

// Issue 18 item 17: a diverged model must be caught, naming the step. Step 2
// is fed a NaN; the later steps inherit NaN weights; the count restarts
// after TakeMetrics().
TEST(MlpCpu, ReportsTheFirstStepWithANonFiniteLoss) {
  const MlpShape shape{.inputs = 4, .hidden = 8, .classes = 3};
  const int64_t n = 2;
  auto mlp = MlpCpu::Create(shape, n, InitialParameters(shape, 1), {});
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  std::vector<float> x = RandomFloats(n * shape.inputs, 1);
  const std::vector<int64_t> y = {0, 2};
  ASSERT_TRUE((*mlp)->TrainStep(x.data(), y.data(), n).ok());
  x[5] = std::nanf("");
  for (int step = 2; step <= 4; ++step) {
    ASSERT_TRUE((*mlp)->TrainStep(x.data(), y.data(), n).ok());
  }
  absl::StatusOr<MlpMetrics> m = (*mlp)->TakeMetrics();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->first_nonfinite_step, 2);
  EXPECT_FALSE(std::isfinite(m->train_loss_sum));
  ASSERT_TRUE((*mlp)->TrainStep(x.data(), y.data(), n).ok());
  m = (*mlp)->TakeMetrics();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->first_nonfinite_step, 1);
}

TEST(MlpCpu, FiniteStepsReportNoNonFiniteStep) {
  const MlpShape shape{.inputs = 4, .hidden = 8, .classes = 3};
  auto mlp = MlpCpu::Create(shape, 2, InitialParameters(shape, 1), {});
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  const std::vector<float> x = RandomFloats(8, 1);
  const std::vector<int64_t> y = {0, 2};
  ASSERT_TRUE((*mlp)->TrainStep(x.data(), y.data(), 2).ok());
  absl::StatusOr<MlpMetrics> m = (*mlp)->TakeMetrics();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->first_nonfinite_step, 0);
}

TEST(ScaledLearningRate, IsLinearBelowTheReferenceBatchAndFlatAbove) {
  EXPECT_DOUBLE_EQ(ScaledLearningRate(0.05, kLearningRateBatch), 0.05);
  EXPECT_DOUBLE_EQ(ScaledLearningRate(0.05, 4096), 0.05);
  EXPECT_DOUBLE_EQ(ScaledLearningRate(0.05, 128), 0.025);
  EXPECT_DOUBLE_EQ(ScaledLearningRate(0.05, 7), 0.05 * 7 / 256);
}

TEST(MlpCpu, LossFallsOnALearnableBatch) {
  const MlpShape shape{.inputs = 8, .hidden = 16, .classes = 4};
  const int64_t n = 32;
  std::vector<float> x = RandomFloats(n * shape.inputs, 20);
  std::vector<int64_t> y(n);
  for (int64_t s = 0; s < n; ++s) {
    y[s] = s % shape.classes;
    x[s * shape.inputs + y[s]] += 3.0f;  // the label is readable from x
  }
  auto mlp = MlpCpu::Create(shape, n, InitialParameters(shape, 2),
                            {.learning_rate = 0.1f});
  ASSERT_TRUE(mlp.ok());
  ASSERT_TRUE((*mlp)->TrainStep(x.data(), y.data(), n).ok());
  const double first = (*mlp)->TakeMetrics()->train_loss_sum / n;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE((*mlp)->TrainStep(x.data(), y.data(), n).ok());
  }
  (void)(*mlp)->TakeMetrics();
  ASSERT_TRUE((*mlp)->TrainStep(x.data(), y.data(), n).ok());
  const double last = (*mlp)->TakeMetrics()->train_loss_sum / n;
  EXPECT_LT(last, 0.2 * first);
}

// Checkpointing (issue 10): a model restored from another's SaveState()
// continues bit for bit as the original does.
TEST(MlpCpu, RestoredStateContinuesBitForBit) {
  const MlpShape shape{.inputs = 8, .hidden = 16, .classes = 4};
  const int64_t n = 12;
  const SgdOptions sgd{.learning_rate = 0.1f, .momentum = 0.9f};
  auto original = MlpCpu::Create(shape, n, InitialParameters(shape, 4), sgd);
  auto restored = MlpCpu::Create(shape, n, InitialParameters(shape, 5), sgd);
  ASSERT_TRUE(original.ok() && restored.ok());
  auto step = [&](Mlp& mlp, int i) {
    const std::vector<float> x = RandomFloats(n * shape.inputs, 300 + i);
    const std::vector<int64_t> y = RandomLabels(n, shape.classes, 400 + i);
    return mlp.TrainStep(x.data(), y.data(), n);
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(step(**original, i).ok());
  absl::StatusOr<MlpState> saved = (*original)->SaveState();
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_NE(saved->velocity, std::vector<float>(saved->velocity.size(), 0.0f))
      << "three steps leave momentum behind";
  ASSERT_TRUE((*restored)->RestoreState(*saved).ok());
  for (int i = 3; i < 6; ++i) {
    ASSERT_TRUE(step(**original, i).ok());
    ASSERT_TRUE(step(**restored, i).ok());
  }
  EXPECT_EQ(*(*restored)->Parameters(), *(*original)->Parameters());
  EXPECT_EQ((*restored)->SaveState()->velocity,
            (*original)->SaveState()->velocity);
}

TEST(MlpCpu, RefusesAStateOfAnotherShape) {
  const MlpShape shape{.inputs = 8, .hidden = 16, .classes = 4};
  auto mlp = MlpCpu::Create(shape, 2, InitialParameters(shape, 1), {});
  ASSERT_TRUE(mlp.ok());
  const absl::Status s = (*mlp)->RestoreState(MlpState{
      .parameters = std::vector<float>(3), .velocity = std::vector<float>(3)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("needs"), absl::string_view::npos) << s;
}

#if PINWHEEL_HAVE_CUDA
// Data parallel training averages the gradient between the backward pass
// and the update: the hook sees it there, and what it leaves is applied.
TEST(MlpCpu, GradientHookRunsBetweenTheGradientAndTheUpdate) {
  const MlpShape shape{.inputs = 6, .hidden = 5, .classes = 3};
  const int64_t n = 4;
  const std::vector<float> x = RandomFloats(n * shape.inputs, 7);
  const std::vector<int64_t> y = RandomLabels(n, shape.classes, 8);
  const std::vector<float> initial = InitialParameters(shape, 3);
  auto mlp = MlpCpu::Create(shape, n, initial, {.learning_rate = 0.1f});
  ASSERT_TRUE(mlp.ok());
  int calls = 0;
  (*mlp)->set_gradient_hook([&](float* g, int64_t count, void* stream) {
    ++calls;
    EXPECT_EQ(count, static_cast<int64_t>(ParameterLayout(shape).total));
    EXPECT_EQ(stream, nullptr);
    for (int64_t i = 0; i < count; ++i) g[i] = 0.0f;  // as if averaged away
    return absl::OkStatus();
  });
  ASSERT_TRUE((*mlp)->TrainStep(x.data(), y.data(), n).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(*(*mlp)->Parameters(), initial)
      << "a zeroed gradient moves nothing";
  (*mlp)->set_gradient_hook([](float*, int64_t, void*) {
    return absl::UnavailableError("peer gone");
  });
  EXPECT_EQ((*mlp)->TrainStep(x.data(), y.data(), n).code(),
            absl::StatusCode::kUnavailable);
}

TEST(MlpCpu, RefusesABatchWhoseActivationsCannotFitInMemory) {
  const MlpShape shape{.inputs = 256, .hidden = 512, .classes = 10};
  auto mlp =
      MlpCpu::Create(shape, int64_t{1} << 40, InitialParameters(shape, 1), {});
  EXPECT_EQ(mlp.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(MlpCuda, MatchesHostStepForStep_CUDA) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no CUDA device";
  }
  const MlpShape shape{.inputs = 64, .hidden = 96, .classes = 10};
  const int64_t n = 50;  // not a multiple of the kernels' block size
  const SgdOptions sgd{.learning_rate = 0.05f, .momentum = 0.9f};
  const std::vector<float> initial = InitialParameters(shape, 7);
  auto cpu = MlpCpu::Create(shape, n, initial, sgd);
  auto gpu = MlpCuda::Create(0, shape, n, initial, sgd);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  for (int step = 0; step < 5; ++step) {
    const std::vector<float> x = RandomFloats(n * shape.inputs, 100 + step);
    const std::vector<int64_t> y = RandomLabels(n, shape.classes, 200 + step);
    auto dx = (*gpu)->UploadFloats(x.data(), x.size());
    auto dy = (*gpu)->UploadLabels(y.data(), y.size());
    ASSERT_TRUE(dx.ok() && dy.ok());
    ASSERT_TRUE((*cpu)->TrainStep(x.data(), y.data(), n).ok());
    ASSERT_TRUE((*gpu)->TrainStep(*dx, *dy, n).ok());
    ASSERT_TRUE((*cpu)->EvalStep(x.data(), y.data(), n).ok());
    ASSERT_TRUE((*gpu)->EvalStep(*dx, *dy, n).ok());
  }
  auto mc = (*cpu)->TakeMetrics();
  auto mg = (*gpu)->TakeMetrics();
  ASSERT_TRUE(mc.ok()) << mc.status();
  ASSERT_TRUE(mg.ok()) << mg.status();
  EXPECT_NEAR(mg->train_loss_sum, mc->train_loss_sum,
              1e-4 * std::fabs(mc->train_loss_sum));
  EXPECT_EQ(mg->train_samples, mc->train_samples);
  EXPECT_NEAR(static_cast<double>(mg->eval_correct),
              static_cast<double>(mc->eval_correct), 1.0);
  auto pc = (*cpu)->Parameters();
  auto pg = (*gpu)->Parameters();
  ASSERT_TRUE(pc.ok() && pg.ok());
  ASSERT_EQ(pc->size(), pg->size());
  for (size_t i = 0; i < pc->size(); ++i) {
    ASSERT_NEAR((*pg)[i], (*pc)[i], 1e-4 + 1e-3 * std::fabs((*pc)[i]))
        << "parameter " << i;
  }
}

TEST(MlpCuda, ReportsTheFirstStepWithANonFiniteLoss_CUDA) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no CUDA device";
  }
  const MlpShape shape{.inputs = 4, .hidden = 8, .classes = 3};
  const int64_t n = 2;
  auto mlp = MlpCuda::Create(0, shape, n, InitialParameters(shape, 1), {});
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  std::vector<float> x = RandomFloats(n * shape.inputs, 1);
  const std::vector<int64_t> y = {0, 2};
  auto good = (*mlp)->UploadFloats(x.data(), x.size());
  x[5] = std::nanf("");
  auto bad = (*mlp)->UploadFloats(x.data(), x.size());
  auto dy = (*mlp)->UploadLabels(y.data(), y.size());
  ASSERT_TRUE(good.ok() && bad.ok() && dy.ok());
  ASSERT_TRUE((*mlp)->TrainStep(*good, *dy, n).ok());
  for (int step = 2; step <= 4; ++step) {
    ASSERT_TRUE((*mlp)->TrainStep(*bad, *dy, n).ok());
  }
  absl::StatusOr<MlpMetrics> m = (*mlp)->TakeMetrics();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->first_nonfinite_step, 2);
  ASSERT_TRUE((*mlp)->TrainStep(*good, *dy, n).ok());
  m = (*mlp)->TakeMetrics();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->first_nonfinite_step, 1);
}

// The trainer's kill/resume test compares final weights byte for byte on the
// GPU too: the same steps give the same bytes run to run (no atomics in the
// reductions, a fixed cuBLAS stream), and a restored model continues as the
// original.
TEST(MlpCuda, RestoredStateContinuesBitForBit_CUDA) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no CUDA device";
  }
  const MlpShape shape{.inputs = 64, .hidden = 96, .classes = 10};
  const int64_t n = 50;
  const SgdOptions sgd{.learning_rate = 0.05f, .momentum = 0.9f};
  auto original =
      MlpCuda::Create(0, shape, n, InitialParameters(shape, 7), sgd);
  auto twin = MlpCuda::Create(0, shape, n, InitialParameters(shape, 7), sgd);
  auto restored =
      MlpCuda::Create(0, shape, n, InitialParameters(shape, 8), sgd);
  ASSERT_TRUE(original.ok() && twin.ok() && restored.ok());
  std::vector<std::pair<float*, int64_t*>> batches;
  for (int i = 0; i < 6; ++i) {
    const std::vector<float> x = RandomFloats(n * shape.inputs, 500 + i);
    const std::vector<int64_t> y = RandomLabels(n, shape.classes, 600 + i);
    auto dx = (*original)->UploadFloats(x.data(), x.size());
    auto dy = (*original)->UploadLabels(y.data(), y.size());
    ASSERT_TRUE(dx.ok() && dy.ok());
    batches.emplace_back(*dx, *dy);
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        (*original)->TrainStep(batches[i].first, batches[i].second, n).ok());
    ASSERT_TRUE(
        (*twin)->TrainStep(batches[i].first, batches[i].second, n).ok());
  }
  absl::StatusOr<MlpState> saved = (*original)->SaveState();
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_TRUE((*restored)->RestoreState(*saved).ok());
  for (int i = 3; i < 6; ++i) {
    for (auto* m : {&*original, &*twin, &*restored}) {
      ASSERT_TRUE((*m)->TrainStep(batches[i].first, batches[i].second, n).ok());
    }
  }
  const std::vector<float> want = *(*original)->Parameters();
  EXPECT_EQ(*(*twin)->Parameters(), want)
      << "two runs of the same steps differ";
  EXPECT_EQ(*(*restored)->Parameters(), want) << "the restored model diverged";
  EXPECT_EQ((*restored)->SaveState()->velocity,
            (*original)->SaveState()->velocity);
}
#endif

}  // namespace
}  // namespace pinwheel::train
