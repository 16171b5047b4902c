// The translation unit that builds the test binaries' shared precompiled
// header (tests/CMakeLists.txt, IBDT_TEST_PCH); it has no code of its own.
