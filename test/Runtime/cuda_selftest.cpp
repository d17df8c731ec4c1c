//===- cuda_selftest.cpp - The cuda backend's transfers, checked ----------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-rt-cuda-selftest calls the transfer entry points of braid_rt.h the
// way compiled code does, on device memory (braid_rt_buffer_alloc), and
// checks every result on the host:
//
//   - all_reduce and reduce_scatter of every reduction kind the ABI has
//     (sum, max, min, product; bitand, bitor, bitxor on integers) on every
//     element type, out of place and in place;
//   - broadcast, where a non-root's source is a pointer into nothing (it
//     overlaps the destination and runs past its allocation: a transport
//     must never read it), and in place;
//   - all_gather, a ring step (send +1, receive -1);
//   - symmetric buffers in a collective, stream signals from the comm
//     stream to the compute stream, host_max and the timer;
//   - one-sided transfers: a ring through a persistent symmetric site
//     (braid_rt_symmetric_site), puts that raise the peer's data flag,
//     counting waits, credits back (braid_rt_signal_add) and peer
//     addresses, over several rounds whose epochs keep counting.
//
// With --stall-signal it only waits on a flag nobody raises, for the
// timeout's message; with --misuse=M it makes one call the runtime's front
// (Front.cpp, shared with the cpu backend) must refuse: signal-add-zero,
// negative-slack, stray-flag or put-outside.
//
// It runs wherever braid-exec-cuda does: BRAID_LOOPBACK=N (N ranks as
// threads of one process), BRAID_NCCL_ID_FILE with BRAID_RANK and
// BRAID_WORLD_SIZE (one process per GPU without MPI), or under mpirun. On
// a GPU machine it checks the real thing; on the emulated device
// (lib/Emulator) it runs the same, every kernel from its PTX, on a CPU.
// The ranks agree on every check with braid_rt_host_max; rank 0 prints
// "OK <check>" or "FAIL <check>" for each and a summary line, failing
// ranks print the first wrong element to stderr, and the exit code is 1
// when any check failed.
//
//===----------------------------------------------------------------------===//

#include "braid/Runtime/braid_rt.h"

#include "HalfFloat.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

using namespace braid::rt;

namespace {

const char *const dtypeNames[] = {"f32", "f64", "f16", "bf16",
                                  "i8",  "i16", "i32", "i64"};
const char *const reductionNames[] = {"sum",    "max",   "min",   "product",
                                      "bitand", "bitor", "bitxor"};
const int64_t elementBytes[] = {4, 8, 2, 2, 1, 2, 4, 8};

bool isFloat(int64_t dtype) { return dtype <= BRAID_RT_BF16; }

/// The value an element holds, as a double that every type represents
/// exactly (small integers; powers of two for products).
double valueOf(int64_t reduction, int64_t rank, int64_t index) {
  if (reduction == BRAID_RT_PRODUCT) {
    static const double factors[] = {-2, -1, 1, 2};
    return factors[(rank + index) % 4];
  }
  if (reduction >= BRAID_RT_BITAND)
    return static_cast<double>((index * 37 + rank * 11 + 5) & 0x7f);
  return static_cast<double>((rank * 3 + index * 7) % 9 - 4);
}

/// f(T{}) for the C type T of `dtype`'s elements (uint16_t, the bits, for
/// f16 and bf16).
template <typename F> auto withElementType(int64_t dtype, F f) {
  switch (dtype) {
  case BRAID_RT_F32:
    return f(float{});
  case BRAID_RT_F64:
    return f(double{});
  case BRAID_RT_F16:
  case BRAID_RT_BF16:
    return f(uint16_t{});
  case BRAID_RT_I8:
    return f(int8_t{});
  case BRAID_RT_I16:
    return f(int16_t{});
  case BRAID_RT_I32:
    return f(int32_t{});
  default:
    return f(int64_t{});
  }
}

void store(std::vector<char> &buffer, int64_t dtype, int64_t index,
           double value) {
  char *p = buffer.data() + index * elementBytes[dtype];
  withElementType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T v;
    if constexpr (std::is_same_v<T, uint16_t>)
      v = dtype == BRAID_RT_F16 ? floatToHalf(static_cast<float>(value))
                                : floatToBf16(static_cast<float>(value));
    else if constexpr (std::is_floating_point_v<T>)
      v = static_cast<T>(value);
    else
      v = static_cast<T>(static_cast<int64_t>(value));
    std::memcpy(p, &v, sizeof v);
  });
}

double load(const std::vector<char> &buffer, int64_t dtype, int64_t index) {
  const char *p = buffer.data() + index * elementBytes[dtype];
  return withElementType(dtype, [&](auto zero) -> double {
    decltype(zero) v;
    std::memcpy(&v, p, sizeof v);
    if constexpr (std::is_same_v<decltype(zero), uint16_t>)
      return dtype == BRAID_RT_F16 ? halfToFloat(v) : bf16ToFloat(v);
    else
      return static_cast<double>(v);
  });
}

/// a op b in the element type: integers wrap at their width.
double combine(int64_t dtype, int64_t reduction, double a, double b) {
  auto wrap = [&](int64_t v) -> double {
    switch (dtype) {
    case BRAID_RT_I8:
      return static_cast<int8_t>(v);
    case BRAID_RT_I16:
      return static_cast<int16_t>(v);
    case BRAID_RT_I32:
      return static_cast<int32_t>(v);
    default:
      return static_cast<double>(v);
    }
  };
  auto x = static_cast<int64_t>(a), y = static_cast<int64_t>(b);
  switch (reduction) {
  case BRAID_RT_SUM:
    return isFloat(dtype) ? a + b : wrap(x + y);
  case BRAID_RT_MAX:
    return a > b ? a : b;
  case BRAID_RT_MIN:
    return a < b ? a : b;
  case BRAID_RT_PRODUCT:
    return isFloat(dtype) ? a * b : wrap(x * y);
  case BRAID_RT_BITAND:
    return wrap(x & y);
  case BRAID_RT_BITOR:
    return wrap(x | y);
  default:
    return wrap(x ^ y);
  }
}

/// Program memory of `bytes` bytes holding `contents`.
struct DeviceBuffer {
  explicit DeviceBuffer(int64_t bytes)
      : bytes(bytes), data(static_cast<char *>(braid_rt_buffer_alloc(bytes))) {}
  ~DeviceBuffer() { braid_rt_buffer_free(data); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  void write(const std::vector<char> &contents, int64_t offset = 0) {
    braid_rt_copy_to_device(data + offset, contents.data(),
                            static_cast<int64_t>(contents.size()));
    braid_rt_synchronize(); // `contents` may go away
  }
  std::vector<char> read(int64_t offset, int64_t length) const {
    std::vector<char> out(static_cast<size_t>(length));
    braid_rt_copy_to_host(out.data(), data + offset, length);
    return out;
  }
  int64_t address(int64_t offset = 0) const {
    return reinterpret_cast<int64_t>(data + offset);
  }
  int64_t bytes;
  char *data;
};

struct Checker {
  int64_t rank = 0, size = 1, world = 0;
  int64_t step = 1;
  std::vector<std::string> names;
  std::vector<double> failed;
  bool ok = true;
  std::string current;

  void begin(const std::string &name) {
    current = name;
    ok = true;
  }
  void expect(bool condition, const char *what, int64_t index, double got,
              double want) {
    if (condition)
      return;
    if (ok)
      std::fprintf(stderr,
                   "braid-rt-cuda-selftest: rank %lld: %s: %s [%lld]: got "
                   "%g, expected %g\n",
                   static_cast<long long>(rank), current.c_str(), what,
                   static_cast<long long>(index), got, want);
    ok = false;
  }
  void end() {
    names.push_back(current);
    failed.push_back(ok ? 0.0 : 1.0);
  }
};

void reductions(Checker &c) {
  const int64_t count = 1003; // not a multiple of any vector width
  for (int64_t dtype = 0; dtype < 8; ++dtype)
    for (int64_t reduction = 0; reduction < 7; ++reduction) {
      if (isFloat(dtype) && reduction >= BRAID_RT_BITAND)
        continue;
      int64_t es = elementBytes[dtype];
      for (bool scatter : {false, true}) {
        c.begin(std::string(scatter ? "reduce_scatter " : "all_reduce ") +
                dtypeNames[dtype] + " " + reductionNames[reduction]);
        int64_t in = scatter ? count * c.size : count;
        std::vector<char> source(static_cast<size_t>(in * es));
        for (int64_t i = 0; i < in; ++i)
          store(source, dtype, i, valueOf(reduction, c.rank, i));
        auto expected = [&](int64_t i) {
          int64_t global = scatter ? c.rank * count + i : i;
          double value = valueOf(reduction, 0, global);
          for (int64_t r = 1; r < c.size; ++r)
            value =
                combine(dtype, reduction, value, valueOf(reduction, r, global));
          return value;
        };
        for (bool inPlace : {false, true}) {
          DeviceBuffer src(in * es), dst(count * es);
          src.write(source);
          // In place: the destination is the source (all_reduce) or this
          // rank's block of it (reduce_scatter).
          int64_t to = inPlace ? src.address(scatter ? c.rank * count * es : 0)
                               : dst.address();
          int64_t request =
              scatter
                  ? braid_rt_reduce_scatter(c.world, src.address(), to, count,
                                            dtype, reduction, c.step++)
                  : braid_rt_all_reduce(c.world, src.address(), to, count,
                                        dtype, reduction, c.step++);
          braid_rt_wait(request);
          std::vector<char> got =
              inPlace ? src.read(scatter ? c.rank * count * es : 0, count * es)
                      : dst.read(0, count * es);
          for (int64_t i = 0; i < count; ++i) {
            double want = expected(i), value = load(got, dtype, i);
            c.expect(value == want, inPlace ? "in place" : "result", i, value,
                     want);
          }
        }
        c.end();
      }
    }
}

void movement(Checker &c) {
  const int64_t bytes = 4096 + 12;
  auto pattern = [](int64_t rank, int64_t i) {
    return static_cast<char>((rank * 31 + i * 7 + 3) & 0xff);
  };
  std::vector<char> mine(bytes);
  for (int64_t i = 0; i < bytes; ++i)
    mine[static_cast<size_t>(i)] = pattern(c.rank, i);

  // Broadcast from the last position. The others' source overlaps their
  // destination and runs 2 KiB past its end: reading it would be a fault.
  c.begin("broadcast (a non-root's source is never read)");
  {
    int64_t root = c.size - 1;
    DeviceBuffer src(bytes), dst(bytes);
    src.write(mine);
    int64_t from = c.rank == root ? src.address() : dst.address(bytes / 2);
    braid_rt_wait(braid_rt_broadcast(c.world, from, dst.address(), bytes, root,
                                     c.step++));
    std::vector<char> got = dst.read(0, bytes);
    for (int64_t i = 0; i < bytes; ++i)
      c.expect(got[i] == pattern(root, i), "byte", i, got[i], pattern(root, i));
  }
  c.end();

  c.begin("broadcast in place from position 0");
  {
    DeviceBuffer buffer(bytes);
    buffer.write(mine);
    braid_rt_wait(braid_rt_broadcast(c.world, buffer.address(),
                                     buffer.address(), bytes, 0, c.step++));
    std::vector<char> got = buffer.read(0, bytes);
    for (int64_t i = 0; i < bytes; ++i)
      c.expect(got[i] == pattern(0, i), "byte", i, got[i], pattern(0, i));
  }
  c.end();

  c.begin("all_gather");
  {
    DeviceBuffer src(bytes), dst(bytes * c.size);
    src.write(mine);
    braid_rt_wait(braid_rt_all_gather(c.world, src.address(), dst.address(),
                                      bytes, c.step++));
    std::vector<char> got = dst.read(0, bytes * c.size);
    for (int64_t r = 0; r < c.size; ++r)
      for (int64_t i = 0; i < bytes; ++i)
        c.expect(got[r * bytes + i] == pattern(r, i), "byte", r * bytes + i,
                 got[r * bytes + i], pattern(r, i));
  }
  c.end();

  c.begin("ring step (send +1, recv -1)");
  {
    DeviceBuffer src(bytes), dst(bytes);
    src.write(mine);
    int64_t send = braid_rt_send(c.world, 1, src.address(), bytes, c.step);
    int64_t recv = braid_rt_recv(c.world, -1, dst.address(), bytes, c.step++);
    braid_rt_wait(send);
    braid_rt_wait(recv);
    int64_t from = (c.rank + c.size - 1) % c.size;
    std::vector<char> got = dst.read(0, bytes);
    for (int64_t i = 0; i < bytes; ++i)
      c.expect(got[i] == pattern(from, i), "byte", i, got[i], pattern(from, i));
  }
  c.end();
}

void symmetricAndSignals(Checker &c) {
  c.begin("symmetric buffers in an all_reduce");
  {
    const int64_t count = 4096;
    auto *mine =
        reinterpret_cast<char *>(braid_rt_symmetric_alloc(c.world, count * 4));
    auto *sum =
        reinterpret_cast<char *>(braid_rt_symmetric_alloc(c.world, count * 4));
    std::vector<char> values(count * 4);
    for (int64_t i = 0; i < count; ++i)
      store(values, BRAID_RT_F32, i, static_cast<double>(c.rank + i % 3));
    braid_rt_copy_to_device(mine, values.data(), count * 4);
    braid_rt_synchronize();
    braid_rt_wait(braid_rt_all_reduce(c.world, reinterpret_cast<int64_t>(mine),
                                      reinterpret_cast<int64_t>(sum), count,
                                      BRAID_RT_F32, BRAID_RT_SUM, c.step++));
    std::vector<char> got(count * 4);
    braid_rt_copy_to_host(got.data(), sum, count * 4);
    for (int64_t i = 0; i < count; ++i) {
      double want = c.size * (c.size - 1) / 2.0 + c.size * (i % 3);
      c.expect(load(got, BRAID_RT_F32, i) == want, "sum", i,
               load(got, BRAID_RT_F32, i), want);
    }
    braid_rt_symmetric_free(c.world, reinterpret_cast<int64_t>(sum));
    braid_rt_symmetric_free(c.world, reinterpret_cast<int64_t>(mine));
  }
  c.end();

  // The comm stream raises a flag after a transfer; the compute stream
  // waits for it without the host. A wrong order would hang the compute
  // stream until the timeout.
  c.begin("stream signals (comm sets, compute waits)");
  {
    DeviceBuffer flag(4), data(64), copy(64);
    flag.write(std::vector<char>(4, 0));
    std::vector<char> mine(64, static_cast<char>(c.rank + 1));
    data.write(mine);
    int64_t send = braid_rt_send(c.world, 0, data.address(), 64, c.step);
    int64_t recv = braid_rt_recv(c.world, 0, copy.address(), 64, c.step++);
    braid_rt_signal_set(flag.address(), 7, /*stream=*/1, c.step);
    braid_rt_signal_wait(flag.address(), 7, /*stream=*/0, c.step);
    braid_rt_signal_wait(flag.address(), 5, /*stream=*/0, c.step++);
    braid_rt_wait(send);
    braid_rt_wait(recv);
    braid_rt_synchronize();
    std::vector<char> got = copy.read(0, 64);
    std::vector<char> value = flag.read(0, 4);
    int32_t raised;
    std::memcpy(&raised, value.data(), 4);
    c.expect(raised == 7, "flag", 0, raised, 7);
    c.expect(got[0] == c.rank + 1, "data", 0, got[0], c.rank + 1);
  }
  c.end();

  c.begin("host_max and the timer");
  {
    double values[2] = {static_cast<double>(c.rank), -1.0 * c.rank};
    braid_rt_host_max(values, 2);
    c.expect(values[0] == c.size - 1, "max of ranks", 0, values[0], c.size - 1);
    c.expect(values[1] == 0, "max of negated ranks", 1, values[1], 0);
    DeviceBuffer a(1 << 20), b(1 << 20);
    a.write(std::vector<char>(1 << 20, 1));
    braid_rt_timer_start();
    braid_rt_wait(braid_rt_all_reduce(c.world, a.address(), b.address(),
                                      (1 << 20) / 4, BRAID_RT_I32, BRAID_RT_SUM,
                                      c.step++));
    double ms = braid_rt_timer_stop();
    c.expect(ms >= 0 && std::isfinite(ms), "milliseconds", 0, ms, 0);
  }
  c.end();
}

void oneSided(Checker &c) {
  c.begin("one-sided ring (put + data flag, credit back, 5 rounds)");
  {
    const int64_t bytes = 256, site = 7;
    auto slot = braid_rt_symmetric_site(c.world, bytes, site);
    // Flag 0 announces data, flag 1 returns the credit.
    auto flags = braid_rt_symmetric_site(c.world, 8, site + 1);
    c.expect(braid_rt_symmetric_site(c.world, bytes, site) == slot,
             "the same site again", 0, 0, 0);
    int64_t self = braid_rt_symmetric_peer(c.world, 0, slot + 16);
    c.expect(self == slot + 16, "own peer address", 0,
             static_cast<double>(self - slot), 16);
    DeviceBuffer source(bytes);
    int64_t from = (c.rank + c.size - 1) % c.size;
    for (int64_t round = 0; round < 5; ++round) {
      source.write(std::vector<char>(static_cast<size_t>(bytes),
                                     static_cast<char>(c.rank * 10 + round)));
      braid_rt_signal_wait_next(flags + 4, /*slack=*/1, c.step);
      int64_t put = braid_rt_put(c.world, 1, source.address(), slot, bytes,
                                 flags, c.step);
      braid_rt_wait(put);
      braid_rt_signal_wait_next(flags, /*slack=*/0, c.step);
      std::vector<char> got(static_cast<size_t>(bytes));
      braid_rt_copy_to_host(got.data(), reinterpret_cast<void *>(slot), bytes);
      braid_rt_signal_add(c.world, -1, flags + 4, 1, c.step++);
      for (int64_t i = 0; i < bytes; ++i)
        c.expect(got[static_cast<size_t>(i)] == from * 10 + round, "slot", i,
                 got[static_cast<size_t>(i)], from * 10 + round);
    }
    // The last credit comes from the peer after its last read.
    braid_rt_synchronize();
    braid_rt_barrier();
    std::vector<char> raw(8);
    braid_rt_copy_to_host(raw.data(), reinterpret_cast<void *>(flags), 8);
    int32_t epochs[2];
    std::memcpy(epochs, raw.data(), 8);
    c.expect(epochs[0] == 5, "data flag epoch", 0, epochs[0], 5);
    c.expect(epochs[1] == 5, "credit flag epoch", 1, epochs[1], 5);
  }
  c.end();
}

std::mutex outcomeMutex;
bool stallSignal = false;
const char *misuse = nullptr;
int outcome = 0;

/// The same misuses as braid-rt-selftest's, for the same messages.
void misuseFront(Checker &c) {
  auto flags = braid_rt_symmetric_site(c.world, 64, 5);
  int32_t stray = 0;
  if (!std::strcmp(misuse, "signal-add-zero"))
    braid_rt_signal_add(c.world, 1, flags, 0, 21);
  else if (!std::strcmp(misuse, "negative-slack"))
    braid_rt_signal_wait_next(flags, -1, 22);
  else if (!std::strcmp(misuse, "stray-flag"))
    braid_rt_signal_wait_next(reinterpret_cast<int64_t>(&stray), 0, 23);
  else if (!std::strcmp(misuse, "put-outside"))
    braid_rt_wait(braid_rt_put(c.world, 1, flags, flags + 32, 64, 0, 24));
  else
    braid_rt_abort("unknown --misuse mode");
}

void runRank(void *) {
  Checker c;
  c.rank = braid_rt_world_rank();
  c.size = braid_rt_world_size();
  c.world = braid_rt_group(1, c.size, 1, 1, 1, /*naxes=*/1, 0);
  if (misuse) {
    misuseFront(c);
    return;
  }
  if (stallSignal) {
    auto flags = braid_rt_symmetric_site(c.world, 4, 3);
    braid_rt_signal_wait_next(flags, /*slack=*/0, 42);
    braid_rt_synchronize();
    return;
  }
  reductions(c);
  movement(c);
  symmetricAndSignals(c);
  oneSided(c);
  braid_rt_host_max(c.failed.data(), static_cast<int64_t>(c.failed.size()));
  int failures = 0;
  for (double f : c.failed)
    failures += f != 0;
  if (c.rank == 0) {
    for (size_t i = 0; i < c.names.size(); ++i)
      std::printf("%s %s\n", c.failed[i] ? "FAIL" : "OK", c.names[i].c_str());
    std::printf("braid-rt-cuda-selftest: %zu checks, %d failed, on %lld "
                "ranks (%s)\n",
                c.names.size(), failures, static_cast<long long>(c.size),
                braid_rt_loopback_ranks() ? "loopback" : "nccl");
    std::fflush(stdout);
  }
  std::lock_guard<std::mutex> lock(outcomeMutex);
  if (failures)
    outcome = 1;
}

} // namespace

int main(int argc, char **argv) {
  braid_rt_init(&argc, &argv);
  stallSignal = argc > 1 && std::strcmp(argv[1], "--stall-signal") == 0;
  if (argc > 1 && std::strncmp(argv[1], "--misuse=", 9) == 0)
    misuse = argv[1] + 9;
  if (braid_rt_loopback_ranks() > 0)
    braid_rt_loopback_run(runRank, nullptr);
  else
    runRank(nullptr);
  braid_rt_finalize();
  return outcome;
}
