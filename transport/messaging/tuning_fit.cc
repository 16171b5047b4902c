// Fitting a path's cost to its end-to-end timings (tuning.h).
#include <algorithm>
#include <cmath>
#include <utility>

#include "transport/messaging/tuning.h"

namespace ibdt::messaging {
namespace {

// Solves the n x n system a x = b (n <= 3) by Gaussian elimination with
// partial pivoting; false when it is singular (samples that cannot tell
// the terms apart).
bool solve(double a[3][3], double b[3], int n, double x[3]) {
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int row = col + 1; row < n; ++row) {
      if (std::fabs(a[row][col]) > std::fabs(a[pivot][col])) pivot = row;
    }
    if (std::fabs(a[pivot][col]) < 1e-9 * std::fabs(a[0][0])) return false;
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    for (int row = col + 1; row < n; ++row) {
      double factor = a[row][col] / a[col][col];
      for (int k = col; k < n; ++k) a[row][k] -= factor * a[col][k];
      b[row] -= factor * b[col];
    }
  }
  for (int row = n - 1; row >= 0; --row) {
    double sum = b[row];
    for (int k = row + 1; k < n; ++k) sum -= a[row][k] * x[k];
    x[row] = sum / a[row][row];
  }
  return true;
}

// Weighted least squares over the columns in `use` (message, byte, block).
bool fitColumns(const std::vector<TuningSample>& samples, const bool use[3], const double scale[3], double x[3]) {
  int map[3], n = 0;
  for (int c = 0; c < 3; ++c) {
    if (use[c]) map[n++] = c;
  }
  double reference = 0;  // keeps the weighted rows of order one
  for (const TuningSample& s : samples) reference += s.ns / static_cast<double>(samples.size());
  double normal[3][3] = {}, rhs[3] = {};
  for (const TuningSample& s : samples) {
    // Each row weighted by 1/time: the residual is a relative error.
    double weight = reference / s.ns;
    double full[3] = {weight, weight * s.bytes / scale[1], weight * s.blocks / scale[2]};
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) normal[i][j] += full[map[i]] * full[map[j]];
      rhs[i] += full[map[i]] * reference;  // the weighted target, weight * time
    }
  }
  double solved[3] = {};
  if (!solve(normal, rhs, n, solved)) return false;
  for (int c = 0; c < 3; ++c) x[c] = 0;
  for (int i = 0; i < n; ++i) x[map[i]] = solved[i];
  return true;
}

}  // namespace

Result<PathCost> fitPathCost(const std::vector<TuningSample>& samples, bool withBlocks) {
  const int terms = withBlocks ? 3 : 2;
  if (static_cast<int>(samples.size()) < terms) {
    return makeError(Code::kInvalidArgument, "fitting a path cost: ", samples.size(), " samples for ", terms, " terms");
  }
  // Columns scaled to order one, so the normal equations stay well conditioned.
  double scale[3] = {1, 1, 1};
  for (const TuningSample& s : samples) {
    if (!(s.ns > 0) || !std::isfinite(s.ns) || s.bytes < 0 || s.blocks < 0) {
      return makeError(Code::kInvalidArgument, "fitting a path cost: bad sample (", s.bytes, " B, ", s.blocks,
                       " blocks, ", s.ns, " ns)");
    }
    scale[1] = std::max(scale[1], s.bytes);
    scale[2] = std::max(scale[2], s.blocks);
  }
  bool use[3] = {true, true, withBlocks};
  double x[3] = {};
  // A cost never falls as bytes or blocks grow: a slope the noise of a
  // loaded machine fits below zero is dropped and the rest refitted, so the
  // model cannot extrapolate to negative times.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (!fitColumns(samples, use, scale, x)) {
      return makeError(Code::kInvalidArgument, "fitting a path cost: the samples do not separate the ", terms,
                       " terms (sizes and block counts must vary independently)");
    }
    int negative = x[1] < 0 ? 1 : x[2] < 0 ? 2 : 0;
    if (negative == 0) break;
    use[negative] = false;
  }
  PathCost cost;
  cost.measured = true;
  cost.perMessageNs = x[0];
  cost.perByteNs = std::max(0.0, x[1]) / scale[1];
  cost.perBlockNs = std::max(0.0, x[2]) / scale[2];
  return cost;
}

}  // namespace ibdt::messaging
