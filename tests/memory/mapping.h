// tests/memory/mapping.h — anonymous mappings that tests unmap and map again.
#pragma once

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace ibdt::memory::testing {

class Mapping {
 public:
  explicit Mapping(size_t length) : length_(length) {
    void* memory = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = memory == MAP_FAILED ? nullptr : static_cast<uint8_t*>(memory);
  }
  ~Mapping() {
    if (data_ != nullptr) munmap(data_, length_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  uint8_t* data() const { return data_; }
  size_t length() const { return length_; }

  // munmap, then a new mapping of the same length at the same address
  // (MAP_FIXED_NOREPLACE: the munmap alone must be what invalidates). When
  // another thread took the address meanwhile, maps anywhere and returns
  // false.
  bool remapInPlace() {
    munmap(data_, length_);
    void* memory = mmap(data_, length_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                        -1, 0);
    if (memory == data_) return true;
    if (memory != MAP_FAILED) munmap(memory, length_);  // an old kernel took the flag as a hint
    memory = mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = memory == MAP_FAILED ? nullptr : static_cast<uint8_t*>(memory);
    return false;
  }

  // An address with `length` unmapped bytes (mapped, then unmapped again).
  static void* reserveHole(size_t length) {
    void* memory = mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return nullptr;
    munmap(memory, length);
    return memory;
  }

 private:
  uint8_t* data_ = nullptr;
  size_t length_ = 0;
};

}  // namespace ibdt::memory::testing
