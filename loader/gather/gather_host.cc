#include <cstring>

#include "loader/gather/gather_kernels.h"

namespace pinwheel::internal {
namespace {

template <typename T>
void WidenWindow(const std::byte* tokens, int64_t seq_len, int64_t* input,
                 int64_t* target) {
  T previous;
  std::memcpy(&previous, tokens, sizeof(T));
  for (int64_t t = 0; t < seq_len; ++t) {
    T next;
    std::memcpy(&next, tokens + (t + 1) * static_cast<int64_t>(sizeof(T)),
                sizeof(T));
    input[t] = static_cast<int64_t>(previous);
    target[t] = static_cast<int64_t>(next);
    previous = next;
  }
}

}  // namespace

void OrderedKeys(const GatherOrder& order, int64_t samples, int64_t* keys) {
  for (int64_t s = 0; s < samples; ++s) {
    const int64_t index = order::DealAt(order.deal, order.first + s);
    keys[s] =
        order.window_starts == 0
            ? index
            : order::WindowStart(order.window_seed, index, order.window_starts);
  }
}

void GatherRowsOnHost(const int64_t* keys, int64_t samples,
                      const GatherField* fields, int num_fields) {
  for (int f = 0; f < num_fields; ++f) {
    const GatherField& field = fields[f];
    for (int64_t s = 0; s < samples; ++s) {
      std::memcpy(field.output + static_cast<uint64_t>(s) * field.bytes,
                  field.source + static_cast<uint64_t>(keys[s]) * field.stride,
                  field.bytes);
    }
  }
}

void GatherWindowsOnHost(const int64_t* keys, int64_t samples,
                         const GatherWindows& windows) {
  for (int64_t s = 0; s < samples; ++s) {
    const std::byte* tokens =
        windows.tokens + static_cast<uint64_t>(keys[s]) *
                             static_cast<uint64_t>(windows.token_bytes);
    int64_t* input = windows.input + s * windows.seq_len;
    int64_t* target = windows.target + s * windows.seq_len;
    switch (windows.token_bytes) {
      case 1:
        windows.is_signed
            ? WidenWindow<int8_t>(tokens, windows.seq_len, input, target)
            : WidenWindow<uint8_t>(tokens, windows.seq_len, input, target);
        break;
      case 2:
        windows.is_signed
            ? WidenWindow<int16_t>(tokens, windows.seq_len, input, target)
            : WidenWindow<uint16_t>(tokens, windows.seq_len, input, target);
        break;
      case 4:
        windows.is_signed
            ? WidenWindow<int32_t>(tokens, windows.seq_len, input, target)
            : WidenWindow<uint32_t>(tokens, windows.seq_len, input, target);
        break;
      default:
        WidenWindow<int64_t>(tokens, windows.seq_len, input, target);
        break;
    }
  }
}

}  // namespace pinwheel::internal
