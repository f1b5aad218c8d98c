# Handed to llama-cpp-python's build as -DCMAKE_PROJECT_llama.cpp_INCLUDE_BEFORE=<this file>, so it
# runs inside llama.cpp's directory just before its project(). llama-cpp-python forces llama.cpp's
# LLAMA_BUILD_COMMON on (a cache entry, set with FORCE), yet its Python code loads only libllama and
# libggml*: the common library (argument parsing, chat templates, downloads over HTTP) is about 50
# compiles, a third of the build, for nothing. A normal variable shadows the cache entry in this
# directory and below (llama.cpp's option() leaves it alone under policy CMP0077), so common, the
# HTTP client it alone needs, and the install rule that would ship it are all left out.
set(LLAMA_BUILD_COMMON OFF)
