# Warnings and sanitizers, carried by the interface target ibdt_flags.
find_package(Threads REQUIRED)
add_library(ibdt_flags INTERFACE)
target_compile_options(ibdt_flags INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Woverloaded-virtual
  -Wimplicit-fallthrough -Wno-missing-field-initializers)
if(IBDT_WERROR)
  target_compile_options(ibdt_flags INTERFACE -Werror)
endif()
if(IBDT_SANITIZE)
  target_compile_options(ibdt_flags INTERFACE -fsanitize=${IBDT_SANITIZE} -fno-omit-frame-pointer
    -fno-sanitize-recover=all)
  target_link_options(ibdt_flags INTERFACE -fsanitize=${IBDT_SANITIZE})
  # GCC's maybe-uninitialized analysis reports false positives inside
  # libstdc++ (std::function in std::regex) once the sanitizers instrument
  # optimised code; the release build keeps the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(ibdt_flags INTERFACE -Wno-maybe-uninitialized)
  endif()
endif()
