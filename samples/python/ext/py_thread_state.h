// KeepPythonThreadState(): gives the calling (C++ worker) thread one Python
// thread state for the rest of its life.
//
// Note [one Python thread state per worker thread]
// nb::gil_scoped_acquire (PyGILState_Ensure) on a thread Python did not
// create makes a thread state and deletes it again at the matching release,
// so each read() would run in a fresh Python thread: a threading.local set
// by worker_init (a file handle, a per-worker generator) would be gone at
// the next call. Called before taking the GIL, this makes the thread's
// state once and keeps it (never released: it is leaked at thread exit,
// which is at process exit for the loader's oneTBB threads, when taking
// the GIL to free it could hang). Later acquires reuse it.
#ifndef PINWHEEL_SAMPLES_PYTHON_EXT_PY_THREAD_STATE_H_
#define PINWHEEL_SAMPLES_PYTHON_EXT_PY_THREAD_STATE_H_

#include <Python.h>

namespace pinwheel::python {

// REQUIRES: the interpreter is not finalizing. Does nothing when this
// thread holds the GIL or already keeps a state.
inline void KeepPythonThreadState() {
  thread_local bool kept = false;
  if (kept || PyGILState_Check() != 0) return;
  kept = true;
  PyGILState_Ensure();  // its count stays 1: the state is never deleted
  PyEval_SaveThread();  // let go of the GIL, keep the state
}

}  // namespace pinwheel::python

#endif  // PINWHEEL_SAMPLES_PYTHON_EXT_PY_THREAD_STATE_H_
