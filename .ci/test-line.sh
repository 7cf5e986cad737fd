third_party/install-deps.sh --tests && cmake -S . -B build -G Ninja && cmake --build build -j"$(nproc)" && ctest --test-dir build --output-on-failure
