"""A software prefetch for numba kernels: ask the CPU to bring an array element's cache line in.

Why: a batch kernel's row makes a few dozen random reads into its own state, each a cache miss
when the batch's state is larger than the last-level cache. The CPU overlaps misses only within
its reorder window, a few hundred instructions, far less than a row's work; a kernel that knows
the next rows' addresses (their ring's tail, the head-table slots their new tokens hash to) can
start those misses early (ngram: rows ahead; suffix: a block of rows ahead), so they overlap the
current work. A hint only: it never faults and never changes a result.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["prefetch"]


@intrinsic
def prefetch(typingctx, array, index):
    """``prefetch(array, i)``: a read prefetch of ``array[i]`` (``0 <= i < len(array)``) into every
    cache level (LLVM's ``llvm.prefetch``, read, locality 3, data). ``i`` is an int for a 1-d array,
    a tuple of ``array.ndim`` ints for any: indexing the whole array, not a view of a row of it,
    which would cost a reference count update each way."""
    if not isinstance(array, types.Array):
        return None
    if isinstance(index, types.Integer):
        if array.ndim != 1:
            return None
    elif not (isinstance(index, types.BaseTuple) and len(index) == array.ndim
              and all(isinstance(at, types.Integer) for at in index)):
        return None

    def codegen(context, builder, signature, args):
        array_type, index_type = signature.args
        view = context.make_array(array_type)(context, builder, args[0])
        if isinstance(index_type, types.Integer):
            indices = [context.cast(builder, args[1], index_type, types.intp)]
        else:
            items = cgutils.unpack_tuple(builder, args[1], len(index_type))
            indices = [context.cast(builder, item, item_type, types.intp) for item, item_type in zip(items, index_type)]
        pointer = cgutils.get_item_pointer(context, builder, array_type, view, indices, wraparound=False)
        byte_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        function_type = ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32])
        function = cgutils.get_or_insert_function(builder.module, function_type, "llvm.prefetch.p0")
        builder.call(function, [builder.bitcast(pointer, byte_pointer), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(array, index), codegen
