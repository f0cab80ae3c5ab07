"""Flat buffers cut into named blocks, for compiled kernels and for Python alike.

A workspace is a few flat arrays (a compiled call unboxes each array argument, ~40 ns, so a
whole step takes a handful). A *layout* is one compiled function that cuts a buffer into
blocks with ``take``, in order, and returns them as a namedtuple plus the offset after the
last block: the order of the blocks is written there and nowhere else. In compiled code the
blocks are borrowed ``block_view``s (inlined, no reference counts); Python gets NumPy views of
the same memory with ``numpy_views``.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

__all__ = ["block_view", "borrow", "take", "numpy_view", "numpy_views", "split_views",
           "float_array"]


def _is_shape(shape) -> bool:
    return isinstance(shape, types.BaseTuple) and all(
        isinstance(d, types.Integer) for d in shape.types)


def _block(context, builder, buf, view_type, buf_value, start, dims):
    """The borrowed view of ``dims`` (intp values) at element ``start`` of ``buf``."""
    source = make_array(buf)(context, builder, buf_value)
    view = make_array(view_type)(context, builder)
    itemsize = context.get_constant(types.intp, context.get_abi_sizeof(
        context.get_data_type(buf.dtype)))
    strides = [itemsize]
    for d in reversed(dims[1:]):
        strides.insert(0, builder.mul(strides[0], d))
    populate_array(view, data=builder.gep(source.data, [start]), shape=dims,
                   strides=strides, itemsize=itemsize, meminfo=None)
    return view._getvalue()


def _dims(context, builder, shape, shape_value):
    return [context.cast(builder, d, t, types.intp)
            for d, t in zip(cgutils.unpack_tuple(builder, shape_value, len(shape)),
                            shape.types)]


@intrinsic
def block_view(typingctx, buf, offset, shape):
    """``buf[offset:offset + prod(shape)].reshape(shape)`` for a contiguous 1-D ``buf``, in
    compiled code only: a *borrowed* view (no reference count, no bounds or contiguity checks).

    The kernels unpack ~45 such views of their flat buffers per call; with ``reshape`` the
    checks and the reference counting of every view cost ~1.9 µs per call at N = 7, a third
    of the whole recursion. A borrowed view is valid while ``buf`` is alive, i.e. inside the
    compiled call that received ``buf``: never return one to Python as it is (see
    ``numpy_view``). Callers own the layout (see ``dynamics.work_views``)."""
    if not (isinstance(buf, types.Array) and buf.ndim == 1 and buf.layout == "C"
            and isinstance(offset, types.Integer) and _is_shape(shape)):
        return None
    view_type = types.Array(buf.dtype, len(shape), "C", readonly=not buf.mutable)

    def codegen(context, builder, sig, args):
        buf_value, offset_value, shape_value = args
        start = context.cast(builder, offset_value, offset, types.intp)
        return _block(context, builder, buf, view_type, buf_value, start,
                      _dims(context, builder, shape, shape_value))

    return view_type(buf, offset, shape), codegen


@intrinsic
def borrow(typingctx, arr):
    """The same array as a borrowed view (no reference count), in compiled code only.

    Slicing an array that came from Python (``v[j:j + r]``, ``alpha_bar[i]``) makes a view
    that counts a reference to it: an atomic increment and decrement per slice, and a call
    that LLVM cannot see through. Slices of a borrowed view count nothing. Valid while the
    array it borrows from is alive, i.e. inside the compiled call that received it."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, sig, args):
        source = make_array(arr)(context, builder, args[0])
        view = make_array(arr)(context, builder)
        populate_array(view, data=source.data, shape=source.shape, strides=source.strides,
                       itemsize=source.itemsize, meminfo=None)
        return view._getvalue()

    return arr(arr), codegen


@intrinsic
def take(typingctx, buf, o, shape):
    """The block of ``shape`` at offset ``o`` of a flat buffer (``block_view``), and the offset
    after it. An intrinsic, not an inlined function: a layout cuts ~45 blocks, and numba's
    inlining of each call cost ~40 ms of compilation per kernel on a fresh cache."""
    if not (isinstance(buf, types.Array) and buf.ndim == 1 and buf.layout == "C"
            and isinstance(o, types.Integer) and _is_shape(shape)):
        return None
    view_type = types.Array(buf.dtype, len(shape), "C", readonly=not buf.mutable)
    result = types.Tuple((view_type, types.int64))

    def codegen(context, builder, sig, args):
        buf_value, o_value, shape_value = args
        start = context.cast(builder, o_value, o, types.intp)
        dims = _dims(context, builder, shape, shape_value)
        size = context.get_constant(types.intp, 1)
        for d in dims:
            size = builder.mul(size, d)
        view = _block(context, builder, buf, view_type, buf_value, start, dims)
        end = context.cast(builder, builder.add(start, size), types.intp, types.int64)
        return context.make_tuple(builder, result, [view, end])

    return result(buf, o, shape), codegen


def numpy_view(borrowed: np.ndarray, buffer: np.ndarray) -> np.ndarray:
    """The block of ``buffer`` that a compiled ``block_view`` returned, as a NumPy view that
    keeps ``buffer`` alive (the compiled views borrow; see ``block_view``)."""
    start = (borrowed.ctypes.data - buffer.ctypes.data) // buffer.itemsize
    if not (0 <= start and start + borrowed.size <= buffer.size):
        raise AssertionError("view outside its buffer")  # pragma: no cover
    return buffer[start:start + borrowed.size].reshape(borrowed.shape)


def numpy_views(blocks: tuple, buffer: np.ndarray) -> tuple:
    """A layout's namedtuple of borrowed blocks as the same namedtuple of ``numpy_view``s
    (fields that are not arrays, e.g. sizes, are kept as they are)."""
    return type(blocks)(*(numpy_view(b, buffer) if isinstance(b, np.ndarray) else b
                          for b in blocks))


def split_views(blocks: tuple, ints: np.ndarray, floats: np.ndarray, n_ints: int) -> tuple:
    """``numpy_views`` of a layout that cuts two buffers: its first ``n_ints`` blocks of
    ``ints``, the others of ``floats``."""
    fields = type(blocks)._fields
    int_part = numpy_views(blocks._replace(**dict.fromkeys(fields[n_ints:])), ints)
    float_part = numpy_views(blocks._replace(**dict.fromkeys(fields[:n_ints])), floats)
    return type(blocks)(*int_part[:n_ints], *float_part[n_ints:])


_FLOAT64 = np.dtype(np.float64)  # NumPy's one native float64 dtype (``is``: 40 ns less than ==)


def float_array(x) -> np.ndarray:
    """``x`` as the lazily compiled kernels take it, a float64 C-contiguous array (no copy,
    and no call into NumPy, when it is one: a control cycle passes a dozen; any other float64
    dtype object, e.g. byte-swapped, takes the conversion)."""
    if x.__class__ is np.ndarray and x.dtype is _FLOAT64 and x.flags.c_contiguous:
        return x
    return np.ascontiguousarray(x, dtype=np.float64)
