/* A torch.Tensor stand-in built the way torch builds its own, for the C launch path's tests and
 * benchmarks/profile_launch.py: a C base type (torch._C.TensorBase's part: `data_ptr()` and
 * `get_device()` as METH_NOARGS methods, `dtype` as a getset attribute) under a Python subclass
 * named Tensor (runtime_fakes.FakeTorch), whose instances have a __dict__ as torch's do. The
 * launch path reads such tensors through the base type's C functions, which a Python fake
 * (methods written in Python) would never exercise; also `current_device()` (METH_NOARGS) and
 * `raw_stream(device)` (METH_O), torch._C's shapes, for the profile.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    unsigned long long ptr;
    long device;
    PyObject *dtype;
} TensorBase;

static long current = 0;

static PyObject *tb_data_ptr(PyObject *self, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(((TensorBase *)self)->ptr);
}

static PyObject *tb_get_device(PyObject *self, PyObject *unused) {
    return PyLong_FromLong(((TensorBase *)self)->device);
}

static PyObject *tb_dtype(PyObject *self, void *closure) {
    return Py_NewRef(((TensorBase *)self)->dtype);
}

static int tb_init(PyObject *self, PyObject *args, PyObject *kwds) {
    TensorBase *t = (TensorBase *)self;
    PyObject *dtype;
    long device = 0;
    static char *kwlist[] = {"ptr", "dtype", "device", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "KO|l:TensorBase", kwlist, &t->ptr, &dtype, &device))
        return -1;
    t->device = device;
    Py_XSETREF(t->dtype, Py_NewRef(dtype));
    return 0;
}

static int tb_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((TensorBase *)self)->dtype);
    return 0;
}

static int tb_clear(PyObject *self) {
    Py_CLEAR(((TensorBase *)self)->dtype);
    return 0;
}

static void tb_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    tb_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef tb_methods[] = {
    {"data_ptr", tb_data_ptr, METH_NOARGS, NULL},
    {"get_device", tb_get_device, METH_NOARGS, NULL},
    {NULL},
};

static PyGetSetDef tb_getset[] = {
    {"dtype", tb_dtype, NULL, NULL, NULL},
    {NULL},
};

static PyMemberDef tb_members[] = {
    {"ptr", T_ULONGLONG, offsetof(TensorBase, ptr), READONLY, NULL},
    {"dev", T_LONG, offsetof(TensorBase, device), READONLY, NULL},
    {NULL},
};

static PyTypeObject TensorBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ttbuild_fake_ctensor.TensorBase",
    .tp_basicsize = sizeof(TensorBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = tb_init,
    .tp_traverse = tb_traverse,
    .tp_clear = tb_clear,
    .tp_dealloc = tb_dealloc,
    .tp_methods = tb_methods,
    .tp_getset = tb_getset,
    .tp_members = tb_members,
};

static PyObject *current_device(PyObject *m, PyObject *unused) {
    return PyLong_FromLong(current);
}

static PyObject *set_device(PyObject *m, PyObject *d) {
    long v = PyLong_AsLong(d);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    current = v;
    Py_RETURN_NONE;
}

static PyObject *raw_stream(PyObject *m, PyObject *d) {
    long v = PyLong_AsLong(d);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(0x5000 + v);
}

static PyMethodDef module_methods[] = {
    {"current_device", current_device, METH_NOARGS, NULL},
    {"set_device", set_device, METH_O, NULL},
    {"raw_stream", raw_stream, METH_O, NULL},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ttbuild_fake_ctensor",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit_ttbuild_fake_ctensor(void) {
    if (PyType_Ready(&TensorBaseType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&TensorBaseType);
    if (PyModule_AddObject(m, "TensorBase", (PyObject *)&TensorBaseType) < 0) {
        Py_DECREF(&TensorBaseType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
