/* ttbuild's C launch path: the generated Python launch of ttbuild/runtime/fastpath.py, in C.
 *
 * One FastLaunch object per (kernel, fixed grid). A call with exactly the kernel's runtime
 * arguments, positionally (and optionally stream=), where every pointer argument is exactly the
 * namespace's tensor type on torch's current device, every "int" argument an exact int and every
 * "float" argument an exact float, builds the same key tuple the Python path builds
 * (fastpath.source documents it), looks it up in the shared dict D (fill() adds a missing key
 * through the generic path: variant selection, loading), packs the parameters into 8-byte slots
 * on the stack and calls cuLaunchKernel through the function pointer it was given, with the GIL
 * released as in Triton's launcher. Anything else (keywords, other types, tensors on another
 * device, an int out of range, a hit without C launch data) is handed, untouched, to the Python
 * launch of the same grid, which decides: generic path, error, or launch.
 *
 * The hit's element 8 (ttbuild.runtime.launcher._Compiled.fast_state) is the C launch data:
 * bytes "<QIII" (function handle, block x, dynamic shared bytes, parameter count) followed by
 * one code per parameter: 'p' pointer, struct codes b h i q B H I Q e f d, 'z' bf16; a variant
 * with global scratch (ttbuild.runtime.scratch) adds "<QQQ": bytes per program, alignment and the
 * address of its GlobalScratch's epoch (a uint64), and its hit's element 9 is its ScratchUse:
 * use(stream, programs) -> the address of the stream's buffer, passed after the parameters. The
 * FastLaunch keeps the last (device, stream, size, alignment, epoch) it asked for and the address
 * it got: while they hold (and the stream is not the per-thread default stream), a launch calls
 * no Python for it. The address is the stream's live buffer until the epoch changes (scratch
 * bumps it when a buffer is replaced by a larger one or freed, before it is freed).
 * cuLaunchKernel: CUDA Driver API, Execution Control; PTX kernel parameters are copied by the
 * call, so stack slots suffice.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#define MAX_PARAMS 64

typedef int (*cu_launch_t)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                           unsigned bz, unsigned shared, void *stream, void **params, void **extra);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t n;
    Py_ssize_t n_key;
    char kinds[MAX_PARAMS]; /* 'p' pointer, 'i' int, 'f' float, 'a' any (fastpath.position_kinds) */
    unsigned g0, g1, g2;
    PyObject *ns;       /* the launcher's namespace: TT, getdev, rawstream, D, fill, tok, norm_stream, fail_code */
    PyObject *fallback; /* the generated Python launch of the same grid */
    cu_launch_t launch;
    int has_any;         /* some parameter is of kind 'a': no one-entry cache */
    PyObject *last_key;  /* the one-entry cache: the last key looked up in D, its hit, */
    PyObject *last_hit;  /* and its fields as compared (dtypes borrowed from last_key) */
    long last_dev;
    long long last_comp[2 * MAX_PARAMS];
    PyObject *last_dtype[MAX_PARAMS];
    /* global scratch: what the address sc_addr was asked for (sc_valid: there is one) */
    int sc_valid;
    long sc_dev;
    void *sc_stream;
    uint64_t sc_size, sc_align, sc_epoch_addr, sc_epoch, sc_addr;
} FastLaunch;

#define PER_THREAD_STREAM ((void *)(uintptr_t)2) /* CU_STREAM_PER_THREAD: another stream per thread */

static PyObject *s_TT, *s_getdev, *s_rawstream, *s_D, *s_fill, *s_tok, *s_norm_stream, *s_fail_code;
static PyObject *s_get_device, *s_data_ptr, *s_dtype, *s_stream;

static PyObject *ns_get(FastLaunch *self, PyObject *name) {
    PyObject *v = PyDict_GetItemWithError(self->ns, name); /* borrowed */
    if (v == NULL && !PyErr_Occurred())
        PyErr_Format(PyExc_KeyError, "ttbuild launch namespace lacks %U", name);
    return v;
}

/* How a launch reads its tensors: through the C functions of their type's own `get_device()`,
 * `data_ptr()` (METH_NOARGS methods) and `dtype` (a getset attribute), as torch.Tensor has them
 * from torch._C.TensorBase, called directly. The same functions a call by name reaches, minus
 * the interpreter's lookup and call machinery around each: about 23 ns of 31 per read with a
 * C-typed tensor (benchmarks/profile_launch.py), twelve reads for four tensors; on an H100 host
 * these reads, the direct getdev/rawstream calls below and the one-frame kernel[grid] took the
 * launcher's own cost for four tensors from 2.87 to 2.15 us (bench_launch.py --before). Looked
 * up once per launch (_PyType_Lookup answers from the type attribute cache), so a type whose
 * methods were replaced (say by a Python wrapper) or whose attribute access is customised is
 * read by name, as is anything that is not such a C function. An instance attribute named get_device
 * or data_ptr is not consulted (the interpreter would let it shadow the method): torch's
 * tensors hold their state in C, and tensor subclasses are not TT and take the Python path. */
typedef struct {
    PyCFunction get_device, data_ptr; /* NULL: call the method by name */
    getter dtype;                     /* NULL: read the attribute by name */
    void *dtype_closure;
} TensorReads;

static PyCFunction noargs_method(PyTypeObject *tp, PyObject *name) {
    PyObject *d = _PyType_Lookup(tp, name); /* borrowed; no error set */
    if (d == NULL || !Py_IS_TYPE(d, &PyMethodDescr_Type))
        return NULL;
    PyMethodDef *ml = ((PyMethodDescrObject *)d)->d_method;
    return (ml->ml_flags & ~METH_COEXIST) == METH_NOARGS ? ml->ml_meth : NULL;
}

static void tensor_reads(PyTypeObject *tp, TensorReads *r) {
    memset(r, 0, sizeof *r);
    if (tp->tp_getattro != PyObject_GenericGetAttr)
        return;
    r->get_device = noargs_method(tp, s_get_device);
    r->data_ptr = noargs_method(tp, s_data_ptr);
    PyObject *d = _PyType_Lookup(tp, s_dtype);
    if (d != NULL && Py_IS_TYPE(d, &PyGetSetDescr_Type) && ((PyGetSetDescrObject *)d)->d_getset->get != NULL) {
        r->dtype = ((PyGetSetDescrObject *)d)->d_getset->get;
        r->dtype_closure = ((PyGetSetDescrObject *)d)->d_getset->closure;
    }
}

/* A direct call's result, checked as the interpreter checks one (NULL comes with an error). */
static PyObject *checked(PyObject *r) {
    if (r == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_SystemError, "a C function called by the launch returned NULL without an error");
    return r;
}

static PyObject *read_method(PyObject *a, PyCFunction f, PyObject *name) {
    return f != NULL ? checked(f(a, NULL)) : PyObject_CallMethodNoArgs(a, name);
}

/* getdev() and rawstream(device): torch._C's builtins (METH_NOARGS, METH_O), called directly
 * like the tensor reads; any other callable through the interpreter. */
static PyObject *call_noargs(PyObject *f) {
    if (PyCFunction_CheckExact(f) && (PyCFunction_GET_FLAGS(f) & ~METH_COEXIST) == METH_NOARGS)
        return checked(PyCFunction_GET_FUNCTION(f)(PyCFunction_GET_SELF(f), NULL));
    return PyObject_CallNoArgs(f);
}

static PyObject *call_onearg(PyObject *f, PyObject *x) {
    if (PyCFunction_CheckExact(f) && (PyCFunction_GET_FLAGS(f) & ~METH_COEXIST) == METH_O)
        return checked(PyCFunction_GET_FUNCTION(f)(PyCFunction_GET_SELF(f), x));
    return PyObject_CallOneArg(f, x);
}

/* fp32 -> bf16 bits, round to nearest even, NaN kept quiet: launcher._bf16_bits. */
static uint16_t bf16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu))
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static int pack_int(char c, long long x, uint64_t *slot);

/* Pack one scalar `v` by struct code `c` into `slot`. 0: packed; 1: not packable here (the
 * Python path will pack it or say why); -1: a Python error is set. */
static int pack_scalar(char c, PyObject *v, uint64_t *slot) {
    *slot = 0;
    if (c == 'e' || c == 'f' || c == 'd' || c == 'z') {
        double x = PyFloat_AsDouble(v);
        if (x == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 1;
        }
        if (c == 'd') {
            memcpy(slot, &x, 8);
            return 0;
        }
        if (isfinite(x) && fabs(x) > FLT_MAX && c != 'e')
            return 1; /* struct refuses it: let the Python path say so */
        if (c == 'f') {
            float f = (float)x;
            memcpy(slot, &f, 4);
            return 0;
        }
        if (c == 'z') {
            uint16_t b = bf16_bits((float)x);
            memcpy(slot, &b, 2);
            return 0;
        }
#if PY_VERSION_HEX >= 0x030B0000
        if (PyFloat_Pack2(x, (char *)slot, 1) < 0) {
#else
        if (_PyFloat_Pack2(x, (unsigned char *)slot, 1) < 0) {
#endif
            PyErr_Clear();
            return 1;
        }
        return 0;
    }
    if (!PyLong_Check(v))
        return 1; /* struct would take __index__ objects: the Python path does */
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 1;
    }
    if (overflow) {
        if (c != 'Q' || overflow < 0)
            return 1;
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return 1;
        }
        *slot = u;
        return 0;
    }
    return pack_int(c, x, slot);
}

/* Pack an integer that fits a long long by integer struct code `c` (pack_scalar's verdicts). */
static int pack_int(char c, long long x, uint64_t *slot) {
    *slot = 0;
    switch (c) {
    case 'b': if (x < INT8_MIN || x > INT8_MAX) return 1; { int8_t t = (int8_t)x; memcpy(slot, &t, 1); } return 0;
    case 'B': if (x < 0 || x > UINT8_MAX) return 1; { uint8_t t = (uint8_t)x; memcpy(slot, &t, 1); } return 0;
    case 'h': if (x < INT16_MIN || x > INT16_MAX) return 1; { int16_t t = (int16_t)x; memcpy(slot, &t, 2); } return 0;
    case 'H': if (x < 0 || x > UINT16_MAX) return 1; { uint16_t t = (uint16_t)x; memcpy(slot, &t, 2); } return 0;
    case 'i': if (x < INT32_MIN || x > INT32_MAX) return 1; { int32_t t = (int32_t)x; memcpy(slot, &t, 4); } return 0;
    case 'I': if (x < 0 || x > (long long)UINT32_MAX) return 1; { uint32_t t = (uint32_t)x; memcpy(slot, &t, 4); } return 0;
    case 'q': memcpy(slot, &x, 8); return 0;
    case 'Q': if (x < 0) return 1; memcpy(slot, &x, 8); return 0;
    default: return 1;
    }
}

static PyObject *fall_back(FastLaunch *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

/* What a caller in this file (DescExpand) has read of some arguments already: where has[i], v[i]
 * is the address of pointer argument i (its type is then exactly TT and dev[i] its
 * get_device()) or the value of "int" argument i (an exact int). */
typedef struct {
    unsigned char has[MAX_PARAMS];
    long long v[MAX_PARAMS];
    long dev[MAX_PARAMS];
} Known;

static int is_int_code(char c) {
    return c != 'e' && c != 'f' && c != 'd' && c != 'z';
}

static PyObject *fl_launch(FastLaunch *self, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                           const Known *kn);

static PyObject *fl_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    return fl_launch((FastLaunch *)obj, args, nargsf, kwnames, NULL);
}

static PyObject *fl_launch(FastLaunch *self, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                           const Known *kn) {
    Py_ssize_t n = self->n, nargs = PyVectorcall_NARGS(nargsf);
    PyObject *stream_obj = Py_None;
    if (nargs != n)
        return fall_back(self, args, nargsf, kwnames);
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        if (PyTuple_GET_SIZE(kwnames) != 1 ||
            PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, 0), s_stream) != 0)
            return fall_back(self, args, nargsf, kwnames);
        stream_obj = args[nargs];
    }
    PyObject *TT = ns_get(self, s_TT);
    if (TT == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = args[i];
        char k = self->kinds[i];
        if (kn != NULL && kn->has[i] && k == 'i')
            continue;
        if ((k == 'p' && (PyObject *)Py_TYPE(a) != TT) || (k == 'i' && !PyLong_CheckExact(a)) ||
            (k == 'f' && !PyFloat_CheckExact(a)))
            return fall_back(self, args, nargsf, kwnames);
    }
    PyObject *getdev = ns_get(self, s_getdev);
    if (getdev == NULL)
        return NULL;
    PyObject *dev = call_noargs(getdev);
    if (dev == NULL)
        return NULL;
    long dev_i = PyLong_AsLong(dev);
    if (dev_i == -1 && PyErr_Occurred()) {
        Py_DECREF(dev);
        return NULL;
    }

    uint64_t ptrs[MAX_PARAMS];
    long long comp[2 * MAX_PARAMS]; /* per parameter: (address & 15) or (v >> 31, v & 15) */
    PyObject *dts[MAX_PARAMS];      /* owned: the dtype of each pointer argument */
    PyObject *toks[MAX_PARAMS];     /* owned: the key item of each "any" argument */
    PyObject *result = NULL, *hit = NULL, *key = NULL;
    TensorReads rd;
    int rd_ready = 0;
    memset(dts, 0, sizeof(PyObject *) * n);
    memset(toks, 0, sizeof(PyObject *) * n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = args[i];
        char k = self->kinds[i];
        if (k == 'p') {
            if (!rd_ready) { /* every pointer argument is exactly of type TT: one lookup serves all */
                tensor_reads(Py_TYPE(a), &rd);
                rd_ready = 1;
            }
            if (kn != NULL && kn->has[i]) { /* read by the caller, through the same functions */
                if (kn->dev[i] != dev_i)
                    goto fallback;
                ptrs[i] = (uint64_t)kn->v[i];
            } else {
                PyObject *d = read_method(a, rd.get_device, s_get_device);
                if (d == NULL)
                    goto error;
                long di = PyLong_AsLong(d);
                Py_DECREF(d);
                if (di == -1 && PyErr_Occurred())
                    goto error;
                if (di != dev_i)
                    goto fallback;
                PyObject *p = read_method(a, rd.data_ptr, s_data_ptr);
                if (p == NULL)
                    goto error;
                ptrs[i] = PyLong_AsUnsignedLongLong(p);
                Py_DECREF(p);
                if (ptrs[i] == (uint64_t)-1 && PyErr_Occurred())
                    goto error;
            }
            comp[2 * i] = (long long)(ptrs[i] & 15);
            dts[i] = rd.dtype != NULL ? checked(rd.dtype(a, rd.dtype_closure)) : PyObject_GetAttr(a, s_dtype);
            if (dts[i] == NULL)
                goto error;
        } else if (k == 'i') {
            int overflow = 0;
            long long v = kn != NULL && kn->has[i] ? kn->v[i] : PyLong_AsLongLongAndOverflow(a, &overflow);
            if (overflow)
                goto fallback;
            if (v == -1 && PyErr_Occurred())
                goto error;
            /* Python's v >> 31 and v & 15: floor shift and two's-complement mask, as here */
            comp[2 * i] = v >> 31;
            comp[2 * i + 1] = v & 15;
        } else if (k == 'a') {
            PyObject *tok = ns_get(self, s_tok);
            if (tok == NULL)
                goto error;
            toks[i] = PyObject_CallFunction(tok, "On", a, i);
            if (toks[i] == NULL)
                goto error;
        }
    }

    /* A one-entry cache in front of D: the key this grid launched last, compared field by
     * field (dtype objects by identity, as dict lookup finds them first), so a repeated launch
     * builds no key tuple and hashes nothing. Kernels with "any" parameters always use D. */
    if (self->last_hit != NULL && !self->has_any && dev_i == self->last_dev) {
        int same = 1;
        for (Py_ssize_t i = 0; i < n && same; i++) {
            char k = self->kinds[i];
            if (k == 'p')
                same = dts[i] == self->last_dtype[i] && comp[2 * i] == self->last_comp[2 * i];
            else if (k == 'i')
                same = comp[2 * i] == self->last_comp[2 * i] && comp[2 * i + 1] == self->last_comp[2 * i + 1];
        }
        if (same) {
            hit = self->last_hit;
            Py_INCREF(hit);
        }
    }
    if (hit == NULL) {
        key = PyTuple_New(self->n_key);
        if (key == NULL)
            goto error;
        Py_ssize_t j = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            char k = self->kinds[i];
            if (k == 'p') {
                Py_INCREF(dts[i]);
                PyTuple_SET_ITEM(key, j++, dts[i]);
                PyTuple_SET_ITEM(key, j++, PyLong_FromLongLong(comp[2 * i]));
            } else if (k == 'i') {
                PyTuple_SET_ITEM(key, j++, PyLong_FromLongLong(comp[2 * i]));
                PyTuple_SET_ITEM(key, j++, PyLong_FromLongLong(comp[2 * i + 1]));
            } else if (k == 'a') {
                Py_INCREF(toks[i]);
                PyTuple_SET_ITEM(key, j++, toks[i]);
            }
        }
        Py_INCREF(dev);
        PyTuple_SET_ITEM(key, j, dev);
        for (Py_ssize_t q = 0; q < self->n_key; q++)
            if (PyTuple_GET_ITEM(key, q) == NULL)
                goto error; /* PyLong_From* failed (out of memory) */

        PyObject *D = ns_get(self, s_D);
        if (D == NULL)
            goto error;
        hit = PyDict_GetItemWithError(D, key);
        if (hit != NULL) {
            Py_INCREF(hit);
        } else {
            if (PyErr_Occurred())
                goto error;
            PyObject *fill = ns_get(self, s_fill);
            if (fill == NULL)
                goto error;
            PyObject *argt = PyTuple_New(n);
            if (argt == NULL)
                goto error;
            for (Py_ssize_t i = 0; i < n; i++) {
                Py_INCREF(args[i]);
                PyTuple_SET_ITEM(argt, i, args[i]);
            }
            hit = PyObject_CallFunctionObjArgs(fill, key, argt, dev, NULL);
            Py_DECREF(argt);
            if (hit == NULL)
                goto error;
        }
        if (!self->has_any) {
            /* the key tuple keeps the dtype objects alive that last_dtype points at */
            Py_INCREF(key);
            Py_XSETREF(self->last_key, key);
            Py_INCREF(hit);
            Py_XSETREF(self->last_hit, hit);
            memcpy(self->last_comp, comp, sizeof(long long) * 2 * n);
            for (Py_ssize_t i = 0; i < n; i++)
                self->last_dtype[i] = dts[i];
            self->last_dev = dev_i;
        }
    }
    if (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) < 9 || !PyBytes_Check(PyTuple_GET_ITEM(hit, 8)))
        goto fallback;
    PyObject *info = PyTuple_GET_ITEM(hit, 8);
    const char *raw = PyBytes_AS_STRING(info);
    uint64_t fn;
    uint32_t bx, shared, count;
    memcpy(&fn, raw, 8);
    memcpy(&bx, raw + 8, 4);
    memcpy(&shared, raw + 12, 4);
    memcpy(&count, raw + 16, 4);
    Py_ssize_t info_size = PyBytes_GET_SIZE(info);
    int scratch = info_size == 20 + (Py_ssize_t)count + 24;
    if ((Py_ssize_t)count != n || (info_size != 20 + (Py_ssize_t)count && !scratch))
        goto fallback;
    const char *codes = raw + 20;

    uint64_t slots[MAX_PARAMS + 1];
    void *params[MAX_PARAMS + 1];
    for (Py_ssize_t i = 0; i < n; i++) {
        params[i] = &slots[i];
        if (codes[i] == 'p') {
            if (self->kinds[i] != 'p')
                goto fallback;
            slots[i] = ptrs[i];
            continue;
        }
        int r = kn != NULL && kn->has[i] && self->kinds[i] == 'i' && is_int_code(codes[i])
                    ? pack_int(codes[i], kn->v[i], &slots[i]) : pack_scalar(codes[i], args[i], &slots[i]);
        if (r < 0)
            goto error;
        if (r > 0)
            goto fallback;
    }

    void *stream;
    if (PyLong_CheckExact(stream_obj)) {
        stream = PyLong_AsVoidPtr(stream_obj);
    } else {
        /* None: torch's current stream on the device; any other object: launcher._stream_handle */
        int current = stream_obj == Py_None;
        PyObject *to_handle = ns_get(self, current ? s_rawstream : s_norm_stream);
        if (to_handle == NULL)
            goto error;
        PyObject *s = call_onearg(to_handle, current ? dev : stream_obj);
        if (s == NULL)
            goto error;
        stream = PyLong_AsVoidPtr(s);
        Py_DECREF(s);
    }
    if (stream == NULL && PyErr_Occurred())
        goto error;

    if (scratch) {
        uint64_t sc[3];
        memcpy(sc, raw + 20 + count, sizeof sc);
        uint64_t epoch = *(volatile uint64_t *)(uintptr_t)sc[2];
        if (self->sc_valid && self->sc_dev == dev_i && self->sc_stream == stream && self->sc_size == sc[0] &&
            self->sc_align == sc[1] && self->sc_epoch_addr == sc[2] && self->sc_epoch == epoch &&
            stream != PER_THREAD_STREAM) {
            slots[n] = self->sc_addr;
        } else {
            PyObject *use = PyTuple_GET_SIZE(hit) >= 10 ? PyTuple_GET_ITEM(hit, 9) : Py_None;
            if (use == Py_None)
                goto fallback;
            PyObject *a = PyObject_CallFunction(use, "KK", (unsigned long long)(uintptr_t)stream,
                                                (unsigned long long)self->g0 * self->g1 * self->g2);
            if (a == NULL)
                goto error;
            slots[n] = PyLong_AsUnsignedLongLong(a);
            Py_DECREF(a);
            if (slots[n] == (uint64_t)-1 && PyErr_Occurred())
                goto error;
            /* the epoch read before the call: a release() during it makes the next launch ask again */
            self->sc_valid = stream != PER_THREAD_STREAM;
            self->sc_dev = dev_i;
            self->sc_stream = stream;
            self->sc_size = sc[0];
            self->sc_align = sc[1];
            self->sc_epoch_addr = sc[2];
            self->sc_epoch = epoch;
            self->sc_addr = slots[n];
        }
        params[n] = &slots[n];
    }

    int err;
    Py_BEGIN_ALLOW_THREADS
    err = self->launch((void *)(uintptr_t)fn, self->g0, self->g1, self->g2, bx, 1, 1, shared, stream,
                       params, NULL);
    Py_END_ALLOW_THREADS
    if (err != 0) {
        PyObject *fail = ns_get(self, s_fail_code);
        if (fail == NULL)
            goto error;
        result = PyObject_CallFunction(fail, "iOIII", err, hit, self->g0, self->g1, self->g2);
        goto done;
    }
    Py_INCREF(Py_None);
    result = Py_None;
    goto done;

fallback:
    result = fall_back(self, args, nargsf, kwnames);
    goto done;
error:
    result = NULL;
done:
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(dts[i]);
        Py_XDECREF(toks[i]);
    }
    Py_XDECREF(hit);
    Py_XDECREF(key);
    Py_DECREF(dev);
    return result;
}

static PyObject *fl_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    const char *kinds;
    Py_ssize_t n_kinds;
    unsigned long long launch_addr;
    unsigned int g0, g1, g2;
    PyObject *ns, *fallback;
    static char *kwlist[] = {"kinds", "g0", "g1", "g2", "ns", "fallback", "launch_address", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y#IIIO!OK:FastLaunch", kwlist, &kinds, &n_kinds,
                                     &g0, &g1, &g2, &PyDict_Type, &ns, &fallback, &launch_addr))
        return NULL;
    if (n_kinds < 1 || n_kinds > MAX_PARAMS) {
        PyErr_Format(PyExc_ValueError, "FastLaunch takes 1 to %d parameters, got %zd", MAX_PARAMS, n_kinds);
        return NULL;
    }
    if (!launch_addr || !PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_ValueError, "FastLaunch needs a launch address and a callable fallback");
        return NULL;
    }
    FastLaunch *self = (FastLaunch *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = fl_vectorcall;
    self->n = n_kinds;
    self->n_key = 1;
    for (Py_ssize_t i = 0; i < n_kinds; i++) {
        char k = kinds[i];
        if (k != 'p' && k != 'i' && k != 'f' && k != 'a') {
            Py_DECREF(self);
            PyErr_Format(PyExc_ValueError, "FastLaunch: unknown parameter kind %c", k);
            return NULL;
        }
        self->kinds[i] = k;
        self->n_key += (k == 'p' || k == 'i') ? 2 : (k == 'a' ? 1 : 0);
        self->has_any |= k == 'a';
    }
    self->g0 = g0;
    self->g1 = g1;
    self->g2 = g2;
    Py_INCREF(ns);
    self->ns = ns;
    Py_INCREF(fallback);
    self->fallback = fallback;
    self->launch = (cu_launch_t)(uintptr_t)launch_addr;
    return (PyObject *)self;
}

static int fl_traverse(FastLaunch *self, visitproc visit, void *arg) {
    Py_VISIT(self->ns);
    Py_VISIT(self->fallback);
    Py_VISIT(self->last_key);
    Py_VISIT(self->last_hit);
    return 0;
}

static int fl_clear(FastLaunch *self) {
    Py_CLEAR(self->ns);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->last_key);
    Py_CLEAR(self->last_hit);
    return 0;
}

static void fl_dealloc(FastLaunch *self) {
    PyObject_GC_UnTrack(self);
    fl_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef fl_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(FastLaunch, vectorcall), READONLY, NULL},
    {"fallback", T_OBJECT, offsetof(FastLaunch, fallback), READONLY, "the Python launch of the same grid"},
    {NULL},
};

static PyTypeObject FastLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ttbuild_claunch.FastLaunch",
    .tp_doc = "lib.kernel[grid] as a C launch: see the module's source comment",
    .tp_basicsize = sizeof(FastLaunch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = fl_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FastLaunch, vectorcall),
    .tp_traverse = (traverseproc)fl_traverse,
    .tp_clear = (inquiry)fl_clear,
    .tp_dealloc = (destructor)fl_dealloc,
    .tp_members = fl_members,
};

/* DescExpand: lib.kernel[grid] for a kernel with tensor-descriptor parameters
 * (ttbuild.runtime.tensordesc.DescriptorLauncher). Each descriptor argument (an object with
 * `base`, `shape`, `strides` and `block_shape`, and optionally `padding`: Triton's host
 * TensorDescriptor or ttbuild's) becomes base, shape..., strides[:-1], as tensordesc.expander
 * does, and the expanded arguments go to `inner`. The checks are expander's: block shape as
 * built, rank, exact int extents and strides, last stride 1, strides and base 16-byte aligned,
 * padding "zero" (or missing) or, at a TMA position, "nan"; any argument that is not such an
 * object, fails a check or comes with keywords goes, untouched, to `fallback` (the Python
 * launch), which expands it or raises the descriptor's error (also for padding="nan" read
 * through pointers, which the kernel pads with zeros).
 * A descriptor that loads through TMA has a callable at its position of the optional `tensormaps`
 * tuple (a tensordesc.TensorMapper): tensormap(base, address, shape, strides[, "nan"]) -> the
 * device address of its CUtensorMap (the padding argument only where it is "nan": the map's
 * NaN fill), which goes in front of base; an exception it raises (a descriptor the driver cannot
 * encode) is the launch's. A one-entry cache per position keeps the last
 * (device, address, fill, shape, strides) and its map's address, valid while the TensorMapper's
 * `maps.epoch` is unchanged (TensorMaps bumps it before it may free a map; read through
 * `maps.epoch_address`), so a repeated launch calls no Python.
 *
 * What a launch reads of a descriptor, and how (benchmarks/profile_launch.py's descriptor rows):
 * - its four fields through its type's layout, looked up once per type (kept while the type's
 *   version tag holds): where the type defines none of the four names and has instance dicts
 *   (a dataclass: Triton's TensorDescriptor), one dict lookup each; where each is a __slots__
 *   member, the slot; else by name (getattr); `padding` likewise (a slot, a dict lookup, by
 *   name), or nothing where the type has neither it nor instance dicts (fill "zero");
 * - its base through the base type's C functions (TensorReads): data_ptr() and get_device() once;
 * - per position, the last shape and strides tuples that passed the checks (owned: immutable,
 *   and no other object can take their address) and their values: the same tuples again are not
 *   read or checked again (a list is read every launch); the block shape: the last matching
 *   tuple by identity, else item by item.
 * Where `inner` is the FastLaunch of the expanded parameters (what DescriptorLauncher builds
 * over the C path), the launch goes to it directly with what was read here (Known: addresses,
 * devices, integer values), so its own reads of the same objects are not repeated; any other
 * `inner` gets the expanded arguments in one vectorcall. On an H200 host (bench_descriptor.py
 * --launch-only --before, three runs) this took 3 TMA descriptors + 3 ints against 3 pointers +
 * 3 ints from 1.83-1.88x to 1.36-1.41x for the launcher alone and 1.14-1.17x to 1.07-1.12x for
 * a real launch with ttbuild's (slotted) TensorDescriptor; with Triton's dataclass from
 * 2.45-2.65x to 1.51-1.62x and 1.28-1.41x to 1.07-1.17x. */
#define DESC_MAX_RANK 5 /* TMA's limit and Triton's; a descriptor of higher rank takes the Python launch */
#define HELD (8 * MAX_PARAMS + 32)

enum { FR_NAME, FR_DICT, FR_SLOTS };
/* `padding`: none anywhere ("zero"), a __slots__ member, the instance dict (else by name), by
 * name (an AttributeError: "zero") */
enum { PAD_ZERO, PAD_SLOT, PAD_DICT, PAD_NAME };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t n;           /* call arguments */
    unsigned char plan[MAX_PARAMS]; /* per call argument: 0 passed through, else the rank */
    int elem[MAX_PARAMS];   /* per descriptor argument: element bytes */
    PyObject *blocks;       /* tuple: per call argument, the block shape tuple or None */
    PyObject *tensormaps;   /* NULL, or a tuple: per call argument, its tensormap callable or None */
    PyObject *inner, *fallback;
    /* how the last descriptor type's fields are read (fr_type borrowed: compared with its
     * version tag, which no other type ever gets) */
    PyTypeObject *fr_type;
    unsigned int fr_tag;
    int fr_mode;
    Py_ssize_t fr_off[4];
    int fr_pad;             /* how `padding` is read: PAD_* */
    Py_ssize_t fr_pad_off;  /* PAD_SLOT: its slot's offset */
    /* per descriptor position: the last shape and strides tuples that passed the checks (owned;
     * NULL: none) and their values, shape then strides */
    PyObject *ck_seq[MAX_PARAMS][2];
    long long ck_val[MAX_PARAMS][2 * DESC_MAX_RANK];
    /* per descriptor position: the last block shape tuple that matched the built one (owned) */
    PyObject *de_block[MAX_PARAMS];
    /* per TMA position: the last key (device or LLONG_MIN where the base has no get_device(),
     * address, out-of-bound fill (0 zero, 1 NaN), shape..., strides...), the epoch it was valid
     * in and the map address it gave (owned; NULL: empty) */
    long long tm_key[MAX_PARAMS][3 + 2 * DESC_MAX_RANK];
    long long tm_epoch[MAX_PARAMS];
    PyObject *tm_val[MAX_PARAMS];
    /* the TensorMaps whose epoch counter (a uint64 at tm_epoch_addr) the entry was valid in
     * (owned: it keeps the counter alive; NULL: empty) */
    PyObject *tm_maps[MAX_PARAMS];
    uint64_t tm_epoch_addr[MAX_PARAMS];
} DescExpand;

static PyObject *s_maps, *s_epoch_address;
static PyObject *s_base, *s_shape, *s_strides, *s_block_shape, *s_padding, *s_zero, *s_nan;

/* The current epoch of the entry's TensorMaps: a read of its counter, no Python. */
static long long tm_epoch_now(DescExpand *self, Py_ssize_t i) {
    return (long long)*(volatile uint64_t *)(uintptr_t)self->tm_epoch_addr[i];
}

/* Point entry i at the epoch counter of TensorMapper tm's maps (after a call, which makes
 * them); its epoch now, or -1 (no maps or no counter: the entry stays empty). */
static long long tm_bind_epoch(DescExpand *self, Py_ssize_t i, PyObject *tm) {
    PyObject *maps = PyObject_GetAttr(tm, s_maps);
    if (maps == NULL || maps == Py_None) {
        PyErr_Clear();
        Py_XDECREF(maps);
        return -1;
    }
    PyObject *ea = PyObject_GetAttr(maps, s_epoch_address);
    unsigned long long addr = ea != NULL ? PyLong_AsUnsignedLongLong(ea) : 0;
    Py_XDECREF(ea);
    if (PyErr_Occurred() || addr == 0) {
        PyErr_Clear();
        Py_DECREF(maps);
        return -1;
    }
    Py_XSETREF(self->tm_maps[i], maps);
    self->tm_epoch_addr[i] = addr;
    return tm_epoch_now(self, i);
}

/* 1: equal int sequences; 0: not (or not ints of a sequence) */
static int same_ints(PyObject *seq, PyObject *want) {
    PyObject *fast = PySequence_Fast(seq, "");
    if (fast == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    int ok = n == PyTuple_GET_SIZE(want);
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        int r = PyObject_RichCompareBool(PySequence_Fast_GET_ITEM(fast, i), PyTuple_GET_ITEM(want, i), Py_EQ);
        if (r < 0)
            PyErr_Clear();
        ok = r == 1;
    }
    Py_DECREF(fast);
    return ok;
}

/* How descriptors of type tp have their fields read (see the comment above DescExpand). A type
 * with a custom __getattribute__/__getattr__, a property or class attribute of one of the names,
 * or no instance dict is read by name. */
static void field_reads(DescExpand *self, PyTypeObject *tp) {
    PyObject *names[4] = {s_base, s_shape, s_strides, s_block_shape};
    int no_class_attr = 1, slots = 1;
    self->fr_mode = FR_NAME;
    self->fr_pad = PAD_NAME;
    if (tp->tp_getattro == PyObject_GenericGetAttr) {
        for (int k = 0; k < 4; k++) {
            PyObject *d = _PyType_Lookup(tp, names[k]); /* borrowed; no error set */
            no_class_attr &= d == NULL;
            if (d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type)) {
                PyMemberDef *md = ((PyMemberDescrObject *)d)->d_member;
                if (md->type == T_OBJECT_EX && md->flags == 0 && md->offset > 0) {
                    self->fr_off[k] = md->offset;
                    continue;
                }
            }
            slots = 0;
        }
        int has_dict = tp->tp_dictoffset != 0;
#ifdef Py_TPFLAGS_MANAGED_DICT
        has_dict |= (tp->tp_flags & Py_TPFLAGS_MANAGED_DICT) != 0;
#endif
        if (no_class_attr && has_dict)
            self->fr_mode = FR_DICT;
        else if (slots)
            self->fr_mode = FR_SLOTS;
        /* padding: optional (a descriptor without one pads with zeros); a class attribute (a
         * dataclass default: Triton's) is shadowed by the instance dict, a data descriptor is not */
        PyObject *d = _PyType_Lookup(tp, s_padding);
        if (d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type) &&
            ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX &&
            ((PyMemberDescrObject *)d)->d_member->flags == 0 && ((PyMemberDescrObject *)d)->d_member->offset > 0) {
            self->fr_pad = PAD_SLOT;
            self->fr_pad_off = ((PyMemberDescrObject *)d)->d_member->offset;
        } else if (d == NULL && !has_dict) {
            self->fr_pad = PAD_ZERO;
        } else if (has_dict && (d == NULL || Py_TYPE(d)->tp_descr_set == NULL)) {
            self->fr_pad = PAD_DICT;
        } else {
            self->fr_pad = PAD_NAME;
        }
    }
    /* _PyType_Lookup gave the type a version tag where it could: without one, look up again */
    int tagged = (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) != 0;
    self->fr_type = tagged ? tp : NULL;
    self->fr_tag = tagged ? tp->tp_version_tag : 0;
}

/* A padding value's out-of-bound fill: 0 "zero", 1 "nan", -1 anything else (the Python launch
 * checks it). The interned strings (a literal's, a dataclass default's) match by identity. */
static int pad_fill(PyObject *v) {
    if (v == s_zero)
        return 0;
    if (v == s_nan)
        return 1;
    if (!PyUnicode_CheckExact(v))
        return -1;
    return PyUnicode_CompareWithASCIIString(v, "zero") == 0 ? 0 : PyUnicode_CompareWithASCIIString(v, "nan") == 0 ? 1 : -1;
}

/* d.padding's fill by name (getattr(d, "padding", "zero")); -1 with no error set for anything else. */
static int pad_by_name(PyObject *d) {
    PyObject *v = PyObject_GetAttr(d, s_padding);
    if (v == NULL) {
        int missing = PyErr_ExceptionMatches(PyExc_AttributeError);
        PyErr_Clear();
        return missing ? 0 : -1;
    }
    int r = pad_fill(v);
    Py_DECREF(v);
    return r;
}

/* FR_DICT's reads: the four fields of d into f (owned) and, where fr_pad is PAD_DICT, the fill of
 * the padding in d's dict (2: not there). A dataclass's __init__ stores them in this order under
 * the interned names, so one walk of the dict matching keys by identity finds them (cheaper than
 * a lookup each); the rest, if any, are looked up. 0: read; 1: not (an error may be set). */
static int read_dict(DescExpand *self, PyObject *d, PyObject *f[4], int *pad) {
    PyObject *dict = PyObject_GenericGetDict(d, NULL);
    if (dict == NULL)
        return 1;
    PyObject *want[5] = {s_base, s_shape, s_strides, s_block_shape, s_padding}, *v[5], *key, *val;
    int nw = self->fr_pad == PAD_DICT ? 5 : 4, j = 0;
    Py_ssize_t pos = 0;
    while (j < nw && PyDict_Next(dict, &pos, &key, &val) && key == want[j]) /* borrowed */
        v[j++] = val;
    for (; j < nw; j++) {
        v[j] = PyDict_GetItemWithError(dict, want[j]); /* borrowed */
        if (v[j] == NULL && (j < 4 || PyErr_Occurred()))
            break;
    }
    if (j == nw) {
        for (int k = 0; k < 4; k++)
            f[k] = Py_NewRef(v[k]);
        if (nw == 5)
            *pad = v[4] != NULL ? pad_fill(v[4]) : 2;
    }
    Py_DECREF(dict);
    return j != nw;
}

/* The four fields of descriptor d into f (owned) and its padding's fill into *fill (0 zero,
 * 1 NaN). 0: read; 1: not such an object, or a padding other than "zero" and "nan" (no error set). */
static int read_fields(DescExpand *self, PyObject *d, PyObject *f[4], int *fill) {
    PyTypeObject *tp = Py_TYPE(d);
    if (tp != self->fr_type || !(tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) || tp->tp_version_tag != self->fr_tag)
        field_reads(self, tp);
    int k = 0, pad = 0;
    if (self->fr_mode == FR_SLOTS) {
        for (; k < 4; k++) {
            PyObject *v = *(PyObject **)((char *)d + self->fr_off[k]);
            if (v == NULL)
                goto fail;
            f[k] = Py_NewRef(v);
        }
    } else if (self->fr_mode == FR_DICT) {
        if (read_dict(self, d, f, &pad))
            goto fail;
        k = 4;
    } else {
        PyObject *names[4] = {s_base, s_shape, s_strides, s_block_shape};
        for (; k < 4; k++) {
            f[k] = PyObject_GetAttr(d, names[k]);
            if (f[k] == NULL)
                goto fail;
        }
    }
    if (self->fr_pad == PAD_SLOT) {
        PyObject *v = *(PyObject **)((char *)d + self->fr_pad_off);
        /* the usual "zero" by identity; unset: an AttributeError, "zero" as by name */
        pad = v == s_zero || v == NULL ? 0 : pad_fill(v);
    } else if (self->fr_pad == PAD_NAME || (self->fr_pad == PAD_DICT && (self->fr_mode != FR_DICT || pad == 2))) {
        pad = pad_by_name(d); /* PAD_DICT: not read from the dict above, or not there */
    }
    if (pad < 0)
        goto fail;
    *fill = pad;
    return 0;
fail:
    PyErr_Clear();
    for (int j = 0; j < k; j++)
        Py_DECREF(f[j]);
    return 1;
}

/* A tuple, or a tuple subclass that iterates as one (torch.Size): its items are fixed. */
static int fixed_tuple(PyObject *o) {
    return PyTuple_Check(o) && Py_TYPE(o)->tp_iter == PyTuple_Type.tp_iter;
}

/* The items of a shape or strides field, *len of them: a fixed tuple's or a list's in place,
 * anything else's through PySequence_Fast (a new sequence, *owned). NULL: not a sequence
 * (error cleared). */
static PyObject **seq_items(PyObject *o, Py_ssize_t *len, PyObject **owned) {
    *owned = NULL;
    if (fixed_tuple(o)) {
        *len = PyTuple_GET_SIZE(o);
        return ((PyTupleObject *)o)->ob_item;
    }
    if (PyList_CheckExact(o)) {
        *len = PyList_GET_SIZE(o);
        return ((PyListObject *)o)->ob_item;
    }
    PyObject *fast = PySequence_Fast(o, "");
    if (fast == NULL) {
        PyErr_Clear();
        return NULL;
    }
    *owned = fast;
    *len = PySequence_Fast_GET_SIZE(fast);
    return PySequence_Fast_ITEMS(fast);
}

static PyObject *de_vectorcall(PyObject *obj, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    DescExpand *self = (DescExpand *)obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    /* fewer arguments than call names: trailing constexprs left to their built values, which
     * the launch of the expanded parameters accepts alike */
    if (nargs > self->n || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0))
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    FastLaunch *fl = Py_IS_TYPE(self->inner, &FastLaunchType) ? (FastLaunch *)self->inner : NULL;
    PyObject *TT = NULL; /* borrowed: the tensor type the FastLaunch takes as a pointer */
    if (fl != NULL) {
        TT = PyDict_GetItemWithError(fl->ns, s_TT);
        if (TT == NULL && PyErr_Occurred())
            return NULL;
    }
    PyObject *out[MAX_PARAMS];
    Known kn;
    PyObject *held[HELD]; /* owned: what was read (items of out are borrowed from them) */
    Py_ssize_t m = 0, h = 0;
    PyObject *result = NULL;
    TensorReads rd;
    PyTypeObject *rd_type = NULL; /* the base type rd was looked up for */
    int rd_getdev = 0;            /* whether such a base has get_device() */
    for (Py_ssize_t i = 0; i < nargs; i++) {
        int r = self->plan[i];
        PyObject *a = args[i];
        if (r == 0) {
            if (m >= MAX_PARAMS)
                goto fallback;
            kn.has[m] = 0;
            out[m++] = a;
            continue;
        }
        if (r > DESC_MAX_RANK || h + 8 + 2 * r > HELD)
            goto fallback;
        PyObject *f[4];
        int fill;
        if (read_fields(self, a, f, &fill))
            goto fallback;
        PyObject *base = f[0], *shape = f[1], *strides = f[2], *block = f[3];
        memcpy(held + h, f, sizeof f);
        h += 4;
        if (block != self->de_block[i]) {
            if (!same_ints(block, PyTuple_GET_ITEM(self->blocks, i)))
                goto fallback;
            if (PyTuple_Check(block)) /* immutable: the same one matches again */
                Py_XSETREF(self->de_block[i], Py_NewRef(block));
        }
        /* shape and strides: their items (si, ti) and values (vals: shape, then strides) */
        PyObject **si, **ti, *sseq = shape, *tseq = strides;
        long long fresh[2 * DESC_MAX_RANK];
        const long long *vals;
        if (shape == self->ck_seq[i][0] && strides == self->ck_seq[i][1]) {
            si = ((PyTupleObject *)shape)->ob_item;
            ti = ((PyTupleObject *)strides)->ob_item;
            vals = self->ck_val[i];
        } else {
            Py_ssize_t ns, nt;
            PyObject *os, *ot;
            si = seq_items(shape, &ns, &os);
            if (os != NULL)
                held[h++] = sseq = os;
            if (si == NULL)
                goto fallback;
            ti = seq_items(strides, &nt, &ot);
            if (ot != NULL)
                held[h++] = tseq = ot;
            if (ti == NULL || ns != r || nt != r)
                goto fallback;
            for (Py_ssize_t j = 0; j < r; j++) {
                if (!PyLong_CheckExact(si[j]) || !PyLong_CheckExact(ti[j]))
                    goto fallback;
                int o1 = 0, o2 = 0;
                fresh[j] = PyLong_AsLongLongAndOverflow(si[j], &o1);
                long long v = fresh[r + j] = PyLong_AsLongLongAndOverflow(ti[j], &o2);
                if (o1 || o2)
                    goto fallback;
                /* Python's (v * size) % 16 for a power-of-two modulus: two's-complement bits */
                if (j == r - 1 ? v != 1 : (((unsigned long long)v * (unsigned long long)self->elem[i]) & 15) != 0)
                    goto fallback;
            }
            /* a list's items stay alive through this launch whatever runs meanwhile */
            PyObject **lists[2] = {os == NULL && PyList_CheckExact(shape) ? si : NULL,
                                   ot == NULL && PyList_CheckExact(strides) ? ti : NULL};
            for (int q = 0; q < 2; q++)
                for (Py_ssize_t j = 0; lists[q] != NULL && j < r; j++)
                    held[h++] = Py_NewRef(lists[q][j]);
            vals = fresh;
            if (os == NULL && ot == NULL && fixed_tuple(shape) && fixed_tuple(strides)) {
                Py_XSETREF(self->ck_seq[i][0], Py_NewRef(shape));
                Py_XSETREF(self->ck_seq[i][1], Py_NewRef(strides));
                memcpy(self->ck_val[i], fresh, sizeof(long long) * 2 * r);
            }
        }
        /* the base: its address (16-byte aligned) and, where it has get_device(), its device */
        PyTypeObject *bt = Py_TYPE(base);
        if (bt != rd_type) {
            tensor_reads(bt, &rd);
            rd_type = bt;
            rd_getdev = rd.get_device != NULL || _PyType_Lookup(bt, s_get_device) != NULL;
        }
        PyObject *p = read_method(base, rd.data_ptr, s_data_ptr);
        if (p == NULL)
            goto fallback_clear;
        held[h++] = p;
        unsigned long long addr = PyLong_AsUnsignedLongLong(p);
        if (addr == (unsigned long long)-1 && PyErr_Occurred())
            goto fallback_clear;
        if (addr % 16)
            goto fallback;
        long dev = 0;
        if (rd_getdev) {
            PyObject *d = read_method(base, rd.get_device, s_get_device);
            if (d == NULL)
                goto fallback_clear;
            dev = PyLong_AsLong(d);
            Py_DECREF(d);
            if (dev == -1 && PyErr_Occurred())
                goto fallback_clear;
        }
        PyObject *tm = self->tensormaps != NULL ? PyTuple_GET_ITEM(self->tensormaps, i) : Py_None;
        /* NaN padding needs a map's fill: the pointer form (other=0) is refused by the Python launch */
        if (m + 2 * r + (tm != Py_None) > MAX_PARAMS || (fill && tm == Py_None))
            goto fallback;
        if (tm != Py_None) {
            long long key[3 + 2 * DESC_MAX_RANK];
            size_t nk = sizeof(long long) * (3 + 2 * r);
            key[0] = rd_getdev ? (long long)dev : LLONG_MIN;
            key[1] = (long long)addr;
            key[2] = fill;
            memcpy(key + 3, vals, sizeof(long long) * 2 * r);
            PyObject *map;
            if (self->tm_val[i] != NULL && self->tm_epoch[i] == tm_epoch_now(self, i) &&
                memcmp(self->tm_key[i], key, nk) == 0) {
                map = Py_NewRef(self->tm_val[i]);
            } else {
                PyObject *targs[5] = {base, p, sseq, tseq, s_nan};
                map = PyObject_Vectorcall(tm, targs, fill ? 5 : 4, NULL); /* padding only where "nan" */
                if (map == NULL)
                    goto error;
                /* the epoch after the call, which may have opened a new one */
                long long epoch = tm_bind_epoch(self, i, tm);
                if (epoch >= 0) {
                    Py_XSETREF(self->tm_val[i], Py_NewRef(map));
                    memcpy(self->tm_key[i], key, nk);
                    self->tm_epoch[i] = epoch;
                }
            }
            held[h++] = map;
            int overflow = 0;
            long long mv = PyLong_CheckExact(map) ? PyLong_AsLongLongAndOverflow(map, &overflow) : -1;
            if (mv == -1 && PyErr_Occurred())
                goto error;
            kn.has[m] = fl != NULL && fl->kinds[m] == 'i' && PyLong_CheckExact(map) && !overflow;
            kn.v[m] = mv;
            out[m++] = map;
        }
        kn.has[m] = fl != NULL && fl->kinds[m] == 'p' && (PyObject *)bt == TT && rd_getdev;
        kn.v[m] = (long long)addr;
        kn.dev[m] = dev;
        out[m++] = base;
        for (Py_ssize_t j = 0; j < r; j++) {
            kn.has[m] = fl != NULL && fl->kinds[m] == 'i';
            kn.v[m] = vals[j];
            out[m++] = si[j];
        }
        for (Py_ssize_t j = 0; j + 1 < r; j++) {
            kn.has[m] = fl != NULL && fl->kinds[m] == 'i';
            kn.v[m] = vals[r + j];
            out[m++] = ti[j];
        }
    }
    result = fl != NULL ? fl_launch(fl, out, (size_t)m, NULL, &kn) : PyObject_Vectorcall(self->inner, out, (size_t)m, NULL);
    goto done;
fallback_clear:
    PyErr_Clear();
fallback:
    result = PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    goto done;
error:
    result = NULL;
done:
    for (Py_ssize_t k = 0; k < h; k++)
        Py_DECREF(held[k]);
    return result;
}

static PyObject *de_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    const char *plan;
    Py_ssize_t n;
    PyObject *elems, *blocks, *inner, *fallback, *tensormaps = Py_None;
    static char *kwlist[] = {"plan", "elem_bytes", "blocks", "inner", "fallback", "tensormaps", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y#O!O!OO|O:DescExpand", kwlist, &plan, &n, &PyTuple_Type, &elems,
                                     &PyTuple_Type, &blocks, &inner, &fallback, &tensormaps))
        return NULL;
    if (n < 1 || n > MAX_PARAMS || PyTuple_GET_SIZE(elems) != n || PyTuple_GET_SIZE(blocks) != n) {
        PyErr_Format(PyExc_ValueError, "DescExpand: plan, elem_bytes and blocks must have 1 to %d entries alike",
                     MAX_PARAMS);
        return NULL;
    }
    if (tensormaps != Py_None) {
        if (!PyTuple_Check(tensormaps) || PyTuple_GET_SIZE(tensormaps) != n) {
            PyErr_SetString(PyExc_TypeError, "DescExpand: tensormaps must be None or a tuple with one entry per "
                                             "call argument");
            return NULL;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *t = PyTuple_GET_ITEM(tensormaps, i);
            if (t != Py_None && (!plan[i] || !PyCallable_Check(t))) {
                PyErr_SetString(PyExc_TypeError, "DescExpand: a tensormaps entry is None or, at a descriptor "
                                                 "argument, a callable");
                return NULL;
            }
        }
    }
    if (!PyCallable_Check(inner) || !PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "DescExpand: inner and fallback must be callable");
        return NULL;
    }
    DescExpand *self = (DescExpand *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->n = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        self->plan[i] = (unsigned char)plan[i];
        long e = PyLong_AsLong(PyTuple_GET_ITEM(elems, i));
        if (e == -1 && PyErr_Occurred()) {
            Py_DECREF(self);
            return NULL;
        }
        self->elem[i] = (int)e;
        if (plan[i] && !PyTuple_Check(PyTuple_GET_ITEM(blocks, i))) {
            Py_DECREF(self);
            PyErr_SetString(PyExc_TypeError, "DescExpand: a descriptor argument's block shape must be a tuple");
            return NULL;
        }
    }
    Py_INCREF(blocks);
    self->blocks = blocks;
    if (tensormaps != Py_None) {
        Py_INCREF(tensormaps);
        self->tensormaps = tensormaps;
    }
    Py_INCREF(inner);
    self->inner = inner;
    Py_INCREF(fallback);
    self->fallback = fallback;
    self->vectorcall = de_vectorcall;
    return (PyObject *)self;
}

static int de_traverse(DescExpand *self, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < MAX_PARAMS; i++) {
        Py_VISIT(self->ck_seq[i][0]);
        Py_VISIT(self->ck_seq[i][1]);
        Py_VISIT(self->de_block[i]);
    }
    Py_VISIT(self->blocks);
    Py_VISIT(self->tensormaps);
    Py_VISIT(self->inner);
    Py_VISIT(self->fallback);
    return 0;
}

static int de_clear(DescExpand *self) {
    for (Py_ssize_t i = 0; i < MAX_PARAMS; i++) {
        Py_CLEAR(self->tm_maps[i]);
        Py_CLEAR(self->de_block[i]);
        Py_CLEAR(self->tm_val[i]);
        Py_CLEAR(self->ck_seq[i][0]);
        Py_CLEAR(self->ck_seq[i][1]);
    }
    Py_CLEAR(self->blocks);
    Py_CLEAR(self->tensormaps);
    Py_CLEAR(self->inner);
    Py_CLEAR(self->fallback);
    return 0;
}

static void de_dealloc(DescExpand *self) {
    PyObject_GC_UnTrack(self);
    de_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef de_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(DescExpand, vectorcall), READONLY, NULL},
    {"inner", T_OBJECT, offsetof(DescExpand, inner), READONLY, "the launch of the expanded parameters"},
    {"fallback", T_OBJECT, offsetof(DescExpand, fallback), READONLY, "the Python launch of the same grid"},
    {NULL},
};

static PyTypeObject DescExpandType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ttbuild_claunch.DescExpand",
    .tp_doc = "lib.kernel[grid] for tensor-descriptor parameters: see the source comment above it",
    .tp_basicsize = sizeof(DescExpand),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = de_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(DescExpand, vectorcall),
    .tp_traverse = (traverseproc)de_traverse,
    .tp_clear = (inquiry)de_clear,
    .tp_dealloc = (destructor)de_dealloc,
    .tp_members = de_members,
};

/* A cuLaunchKernel that launches nothing: what benchmarks/profile_launch.py measures the
 * launcher's own host cost against. */
static int noop_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared;
    (void)stream; (void)params; (void)extra;
    return 0;
}

static PyObject *noop_launch_address(PyObject *m, PyObject *unused) {
    return PyLong_FromVoidPtr((void *)(uintptr_t)noop_launch);
}

static PyObject *direct_reads(PyObject *m, PyObject *tp) {
    if (!PyType_Check(tp)) {
        PyErr_SetString(PyExc_TypeError, "direct_reads takes a type");
        return NULL;
    }
    TensorReads r;
    tensor_reads((PyTypeObject *)tp, &r);
    return Py_BuildValue("(OOO)", r.get_device ? Py_True : Py_False, r.data_ptr ? Py_True : Py_False,
                         r.dtype ? Py_True : Py_False);
}

static PyMethodDef module_methods[] = {
    {"noop_launch_address", noop_launch_address, METH_NOARGS,
     "Address of a cuLaunchKernel stand-in that launches nothing and returns CUDA_SUCCESS."},
    {"direct_reads", direct_reads, METH_O,
     "direct_reads(tensor type) -> (get_device, data_ptr, dtype): which of them a launch reads "
     "through the type's C function rather than by name."},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ttbuild_claunch",
    .m_doc = "ttbuild's C launch path (ttbuild/runtime/claunch.c)",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit_ttbuild_claunch(void) {
    if (PyType_Ready(&FastLaunchType) < 0 || PyType_Ready(&DescExpandType) < 0)
        return NULL;
    PyObject **names[] = {&s_TT, &s_getdev, &s_rawstream, &s_D, &s_fill, &s_tok, &s_norm_stream,
                          &s_fail_code, &s_get_device, &s_data_ptr, &s_dtype, &s_stream,
                          &s_base, &s_shape, &s_strides, &s_block_shape, &s_maps, &s_epoch_address,
                          &s_padding, &s_zero, &s_nan};
    const char *texts[] = {"TT", "getdev", "rawstream", "D", "fill", "tok", "norm_stream",
                           "fail_code", "get_device", "data_ptr", "dtype", "stream",
                           "base", "shape", "strides", "block_shape", "maps", "epoch_address",
                           "padding", "zero", "nan"};
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        *names[i] = PyUnicode_InternFromString(texts[i]);
        if (*names[i] == NULL)
            return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&FastLaunchType);
    if (PyModule_AddObject(m, "FastLaunch", (PyObject *)&FastLaunchType) < 0) {
        Py_DECREF(&FastLaunchType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&DescExpandType);
    if (PyModule_AddObject(m, "DescExpand", (PyObject *)&DescExpandType) < 0) {
        Py_DECREF(&DescExpandType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
