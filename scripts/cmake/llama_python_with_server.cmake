# Handed to llama-cpp-python's build as -DCMAKE_PROJECT_INCLUDE=<this file>, together with
# -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON: one compile of llama-cpp-python's own llama.cpp
# yields both libllama for the Python package and llama-server (and llama-quantize, which
# scripts/setup_bench.sh uses), instead of a second llama.cpp build from another package.
#
# Once configuring ends (a deferred call at the end of the top directory), this
#  - leaves every target out of the default build but llama-server and llama-quantize: they and
#    the libraries they link (libllama and libggml among them, which the Python package installs)
#    are still compiled, llama.cpp's other tools are not;
#  - compiles the code outside ggml/ and src/ (the common library, the server, the HTTP library)
#    at -O1 instead of -O3: it parses flags and JSON and drives the decoding loop, the compute is
#    in ggml and libllama, which keep -O3 (but for libllama's files that never run while a token
#    is decoded, -O1 too: _SPECPLUG_LLAMA_OFF_DECODE below). Measured on
#    tools/server/server-context.cpp: 30 instead of 44 CPU seconds to compile. The multimodal library (which llama-server links but runs only
#    with --mmproj; no multimodal model ships on PyPI) is compiled at -O0;
#  - installs the two programs into the package's llama_cpp/bin and the shared libraries they need
#    beyond libllama and libggml into llama_cpp/lib, found through an $ORIGIN-relative RPATH.
if(SPECPLUG_STAGE STREQUAL "python" AND PROJECT_NAME STREQUAL "llama.cpp")
    # The first build makes no common library: llama-cpp-python forces LLAMA_BUILD_COMMON on in the
    # cache, and llama.cpp's install rules then want it installed. A normal variable in llama.cpp's
    # own scope shadows that entry (its option() leaves a normal variable alone, policy CMP0077).
    set(LLAMA_BUILD_COMMON OFF)
endif()
include_guard(GLOBAL)  # included after every project() call; llama.cpp and ggml have their own

set(_SPECPLUG_PROGRAMS llama-server llama-quantize)
# llama.cpp's own rule installs llama-server to <prefix>/bin (site-packages/bin): the same place as ours
set(CMAKE_INSTALL_BINDIR llama_cpp/bin CACHE PATH "where llama.cpp's install rules put programs")
set(_SPECPLUG_LIBRARIES llama-common mtmd llama-server-impl llama-quantize-impl)
# what llama-cpp-python's own install rules put into the package (the others it names are GPU backends)
set(_SPECPLUG_PYTHON_LIBRARIES llama ggml ggml-base ggml-cpu)
# "python": libllama and ggml only (-DLLAMA_BUILD_TOOLS=OFF), "server" (default): everything above
set(SPECPLUG_STAGE server CACHE STRING "which of the two builds in one build tree: python or server")
# libllama's files that never run while a token is decoded (model loading, the tokenizer, quantizing,
# grammars, chat templates, LoRA adapters, the caches of architectures other than the models here):
# -O1, like the common library; the rest of libllama (context, graph, the per-architecture graph
# builders, sampler, KV cache) keeps -O3
set(_SPECPLUG_LLAMA_OFF_DECODE llama-model-loader.cpp llama-vocab.cpp unicode.cpp unicode-data.cpp
    llama-quant.cpp llama-grammar.cpp llama-chat.cpp llama-adapter.cpp llama-arch.cpp llama-model-saver.cpp
    llama-mmap.cpp llama-impl.cpp llama-io.cpp llama-kv-cache-dsv4.cpp llama-kv-cache-dsa.cpp
    llama-kv-cache-dsa-iswa.cpp llama-kv-cache-msa.cpp llama-memory-hybrid.cpp llama-memory-hybrid-iswa.cpp
    llama-memory-hybrid-idx.cpp llama-memory-recurrent.cpp)

function(_specplug_targets_under dir out)
    get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
    foreach(sub IN LISTS subdirs)
        _specplug_targets_under("${sub}" below)
        list(APPEND targets ${below})
    endforeach()
    set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(_specplug_optimization target)
    get_target_property(type "${target}" TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
        return()
    endif()
    get_target_property(dir "${target}" SOURCE_DIR)
    file(RELATIVE_PATH where "${CMAKE_SOURCE_DIR}/vendor/llama.cpp" "${dir}")
    if(where MATCHES "^ggml(/|$)")
        return()  # the compute: llama.cpp's own -O3
    elseif(where STREQUAL "src")
        foreach(file IN LISTS _SPECPLUG_LLAMA_OFF_DECODE)
            # a source's options come after the target's on the command line: this -O1 wins
            set_property(SOURCE "${dir}/${file}" TARGET_DIRECTORY "${target}" APPEND PROPERTY COMPILE_OPTIONS -O1)
        endforeach()
        return()
    elseif(where MATCHES "^tools/mtmd(/|$)")
        set(level -O0)
    else()
        set(level -O1)
    endif()
    # target options come after CMAKE_<LANG>_FLAGS_RELEASE on the command line: the last -O wins
    set_property(TARGET "${target}" APPEND PROPERTY COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:C,CXX>:${level}>")
endfunction()

function(_specplug_build_python_and_server)
    _specplug_targets_under("${CMAKE_SOURCE_DIR}" targets)
    if(SPECPLUG_STAGE STREQUAL "python")
        # the first of two builds in one build tree: only what the Python package loads, so that its
        # demo can run while nothing else is compiled; the second build (tools on) adds the programs
        # and recompiles nothing of this, its compile commands being the same
        set(wanted_targets ${_SPECPLUG_PYTHON_LIBRARIES})
    else()
        set(wanted_targets ${_SPECPLUG_PROGRAMS})
        foreach(wanted IN LISTS _SPECPLUG_PROGRAMS)
            if(NOT wanted IN_LIST targets)
                message(FATAL_ERROR "llama_python_with_server.cmake: this llama.cpp defines no ${wanted} target "
                                    "(configure with -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON)")
            endif()
        endforeach()
    endif()
    foreach(target IN LISTS targets)
        if(NOT target IN_LIST wanted_targets)
            set_property(TARGET "${target}" PROPERTY EXCLUDE_FROM_ALL TRUE)
        endif()
        _specplug_optimization("${target}")
    endforeach()
    if(SPECPLUG_STAGE STREQUAL "python")
        return()
    endif()

    set(package "${SKBUILD_PLATLIB_DIR}/llama_cpp")
    foreach(program IN LISTS _SPECPLUG_PROGRAMS)
        set_target_properties("${program}" PROPERTIES INSTALL_RPATH "$ORIGIN/../lib")
        install(TARGETS "${program}" RUNTIME DESTINATION "${package}/bin")
    endforeach()
    foreach(library IN LISTS _SPECPLUG_LIBRARIES)
        if(TARGET "${library}")
            get_target_property(type "${library}" TYPE)
            if(type STREQUAL "SHARED_LIBRARY")
                set_target_properties("${library}" PROPERTIES INSTALL_RPATH "$ORIGIN")
                install(TARGETS "${library}" LIBRARY DESTINATION "${package}/lib")
            endif()
        endif()
    endforeach()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _specplug_build_python_and_server)
