// convt/cuda/fused_copy_work.hpp — the work list of the wgmma forward kernel when it runs
// the input copy's tiles itself (wg::Params::fuse, CONVT_WG_FUSE=1): which item of its tile
// counter is a copy tile and which a forward tile, and which chunk a copy tile counts for.
// Host and device code (the planner test checks the arithmetic on the CPU).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CONVT_FUSED_HD __host__ __device__ __forceinline__
#else
#define CONVT_FUSED_HD inline
#endif

namespace convt {
namespace cuda {
namespace wg {

// The work is cut in chunks, one per (group, sample). Forward tiles are numbered with the
// group outermost, then the sample (forward chunk c = g * batch + n, fwd_per_chunk tiles
// each); the copy's tiles with the sample outermost, then the group (copy chunk
// n * groups + g, copy_tiles each).
struct FusedCopyWork {
  int64_t copy_tiles;     // copy tiles per chunk
  int64_t fwd_per_chunk;  // forward tiles per chunk
  int batch, groups;
  CONVT_FUSED_HD int chunks() const { return batch * groups; }
  // Items of the tile counter: every copy tile and every forward tile.
  CONVT_FUSED_HD int64_t items() const { return int64_t(chunks()) * (copy_tiles + fwd_per_chunk); }
};

// Item u of the counter: chunk 0's copy tiles first, then each chunk c's forward tiles
// with chunk c + 1's copy tiles spread evenly among them (item i of the segment's
// L = T + K is a copy tile where floor(i K / L) steps up), so that every copy tile of a
// chunk comes before the chunk's first forward tile and copying shares the time with the
// forward. Returns true for a copy tile (`copy`: its index in the copy's own order), false
// for a forward tile (`tile`, and its chunk).
CONVT_FUSED_HD bool fused_copy_item(const FusedCopyWork& f, int64_t u, int64_t& copy,
                                    int64_t& tile, int& chunk) {
  const int64_t K = f.copy_tiles, T = f.fwd_per_chunk;
  const int chunks = f.chunks();
  // (Forward chunk c = g * batch + n -> copy chunk n * groups + g.)
  if (u < K) {
    copy = u;  // forward chunk 0 is copy chunk 0
    return true;
  }
  const int64_t v = u - K;
  const int c = v / (T + K) < chunks - 1 ? int(v / (T + K)) : chunks - 1;
  const int64_t i = v - int64_t(c) * (T + K);
  const int64_t a = c + 1 < chunks ? K : 0;
  const int64_t before = i * a / (T + a), after = (i + 1) * a / (T + a);
  if (after > before) {
    const int next = c + 1;
    copy = (int64_t(next % f.batch) * f.groups + next / f.batch) * K + before;
    return true;
  }
  tile = int64_t(c) * T + (i - before);
  chunk = c;
  return false;
}

// The forward chunk whose forward tiles read copy tile `copy`.
CONVT_FUSED_HD int fused_copy_chunk(const FusedCopyWork& f, int64_t copy) {
  const int64_t cc = copy / f.copy_tiles;  // n * groups + g
  return int(cc % f.groups) * f.batch + int(cc / f.groups);
}

}  // namespace wg
}  // namespace cuda
}  // namespace convt
