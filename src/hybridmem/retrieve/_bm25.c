/* Top-k BM25 over in-memory postings with MaxScore pruning (Turtle & Flood 1995), term at a time.
 *
 * The scores are the bits of the numpy scorer in sparse.py (SparseIndex.search_exhaustive): every
 * weight is the same float32 expression, evaluated in the same order, and a chunk's weights are
 * summed in the same term order (ascending document frequency). Compiled with -ffp-contract=off so
 * no multiply-add is fused.
 *
 * Terms come in that order. Phase 1 scans each term's postings into a float accumulator while a
 * heap keeps the k best chunks seen so far by (score desc, rowid asc); its k-th score is a lower
 * bound of the final k-th best, since a chunk's score only grows as terms are added. As soon as
 * the remaining terms' upper bounds add up to less than it, no chunk not yet seen can reach the
 * top k: phase 2 adds the remaining terms only to the chunks that still can (partial score + the
 * rest's bounds >= the k-th best), looking each up in the term's postings (galloping) when they
 * are few, scanning the postings when they are many. A chunk is dropped only when its bound is
 * below the k-th best, with a margin for float rounding: ties stay, and go to the smaller rowid.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define K1 1.2
#define B 0.75
/* bounds are inflated by this much before a chunk is dropped: float32 rounding of the weights
 * and of up to a few hundred additions stays far below it */
#define MARGIN 1e-4
#define LOOKUP_FACTOR 8 /* look candidates up when they are this many times fewer than the postings */

typedef struct {
    const int32_t *pos;
    const int32_t *tf;
    Py_ssize_t n;
    float idf;
    double ub; /* an upper bound of the term's weight in any chunk */
} Term;

typedef struct {
    float s;
    int64_t r;
    int32_t p;
} Entry;

typedef struct {
    Entry *h;
    int32_t *slot; /* position -> heap index + 1, 0 when not in the heap */
    Py_ssize_t n, k;
    const int64_t *rowids;
    float fl; /* a score below it changes nothing: the k-th best once the heap is full (-1 before) */
} Heap;

static inline float weight(float idf, int32_t tf, float dl, float avgdl) {
    /* bm25_score._weight: norm = K1 * (1.0 - B + B * dl / avgdl); idf * tf * (K1 + 1.0) / (tf + norm),
     * each Python float constant rounded to float32 as numpy does with a float32 array */
    float ftf = (float)tf;
    float norm = (float)K1 * ((float)(1.0 - B) + (float)B * dl / avgdl);
    return idf * ftf * (float)(K1 + 1.0) / (ftf + norm);
}

static inline int worse(const Entry *a, const Entry *b) { return a->s < b->s || (a->s == b->s && a->r > b->r); }

static inline void heap_set(Heap *hp, Py_ssize_t i, Entry e) {
    hp->h[i] = e;
    hp->slot[e.p] = (int32_t)(i + 1);
}

static void sift_down(Heap *hp, Py_ssize_t i) {
    Entry e = hp->h[i];
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= hp->n) break;
        if (c + 1 < hp->n && worse(&hp->h[c + 1], &hp->h[c])) c++;
        if (!worse(&hp->h[c], &e)) break;
        heap_set(hp, i, hp->h[c]);
        i = c;
    }
    heap_set(hp, i, e);
}

static void sift_up(Heap *hp, Py_ssize_t i) {
    Entry e = hp->h[i];
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (!worse(&e, &hp->h[parent])) break;
        heap_set(hp, i, hp->h[parent]);
        i = parent;
    }
    heap_set(hp, i, e);
}

/* chunk p's score is now s (it only grows) */
static void offer_slow(Heap *hp, int32_t p, float s) {
    int32_t at = hp->slot[p];
    if (at) {
        hp->h[at - 1].s = s;
        sift_down(hp, at - 1);
    } else {
        Entry e = {s, hp->rowids[p], p};
        if (hp->n < hp->k) {
            hp->h[hp->n++] = e;
            hp->slot[p] = (int32_t)hp->n;
            sift_up(hp, hp->n - 1);
        } else if (worse(&hp->h[0], &e)) {
            hp->slot[hp->h[0].p] = 0;
            heap_set(hp, 0, e);
            sift_down(hp, 0);
        }
    }
    if (hp->n == hp->k) hp->fl = hp->h[0].s;
}

/* offer_slow only for a score that can change the heap: a chunk in the heap scores >= its k-th
 * best, and one outside enters only at >= (a tie, by rowid). Below it, the heap's slot of p is not
 * even read: one random access a posting fewer (most postings of a query are below it). */
static inline void offer(Heap *hp, int32_t p, float s) {
    if (s >= hp->fl) offer_slow(hp, p, s);
}

static inline double floor_of(const Heap *hp) { return hp->n == hp->k ? (double)hp->h[0].s : 0.0; }

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* first index >= j with pos[index] >= p (pos ascends), galloping from j */
static inline Py_ssize_t gallop(const int32_t *pos, Py_ssize_t n, Py_ssize_t j, int32_t p) {
    if (j >= n || pos[j] >= p) return j;
    Py_ssize_t step = 1, lo = j, hi = j + 1;
    while (hi < n && pos[hi] < p) {
        lo = hi;
        step <<= 1;
        hi = j + step;
    }
    if (hi > n) hi = n;
    /* pos[lo] < p, and pos[hi] >= p or hi == n */
    while (hi - lo > 1) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (pos[mid] < p)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

typedef struct {
    Py_ssize_t scanned, looked_up, pruned_terms;
} Stats;

/* Each thread's scratch, kept between its queries: the score accumulator and the heap's slots,
 * one entry per position and all zero between queries (a query zeroes what it touched), and the
 * candidate list. Allocating them per query (calloc of 8 bytes per chunk: 80 MB at 10M chunks)
 * made every query fault in fresh zero pages: most of a 10M-chunk query's time. */
typedef struct {
    float *acc;
    int32_t *slot;
    Py_ssize_t n;
    int32_t *cand;
    Py_ssize_t cand_n;
} Scratch;

static __thread Scratch tl_scratch = {NULL, NULL, 0, NULL, 0};

/* the thread's scratch for n_total positions and `total` candidates; NULL when out of memory */
static Scratch *scratch(Py_ssize_t n_total, Py_ssize_t total) {
    Scratch *s = &tl_scratch;
    if (s->n < n_total) {
        free(s->acc);
        free(s->slot);
        s->acc = calloc((size_t)n_total, sizeof(float));
        s->slot = calloc((size_t)n_total, sizeof(int32_t));
        s->n = n_total;
        if (!s->acc || !s->slot) {
            free(s->acc);
            free(s->slot);
            s->acc = NULL;
            s->slot = NULL;
            s->n = 0;
            return NULL;
        }
    }
    if (total < 1) total = 1;
    if (s->cand_n < total) {
        free(s->cand);
        s->cand = malloc((size_t)total * sizeof(int32_t));
        s->cand_n = s->cand ? total : 0;
        if (!s->cand) return NULL;
    }
    return s;
}

/* returns 0, or -1 when out of memory */
static int run(Term *t, Py_ssize_t q, const float *dl, float avgdl, const uint8_t *alive, const uint8_t *allowed,
               Py_ssize_t n_total, Heap *hp, Stats *st, Scratch *sc) {
    float *acc = sc->acc; /* all zero */
    int32_t *cand = sc->cand;
    double *rest = malloc((size_t)(q + 1) * sizeof(double));
    if (!rest) return -1;
    rest[q] = 0.0;
    for (Py_ssize_t i = q - 1; i >= 0; i--) rest[i] = rest[i + 1] + t[i].ub;
    Py_ssize_t nc = 0, i = 0;
    /* phase 1: every posting of the terms whose bounds could still bring in a chunk not seen */
    for (; i < q; i++) {
        if (hp->n == hp->k && rest[i] * (1.0 + MARGIN) < floor_of(hp)) break;
        const int32_t *pos = t[i].pos, *tf = t[i].tf;
        float idf = t[i].idf;
        for (Py_ssize_t j = 0; j < t[i].n; j++) {
            int32_t p = pos[j];
            if ((uint32_t)p >= (uint32_t)n_total) continue; /* never in an index's own postings */
            if ((alive && !alive[p]) || (allowed && !allowed[p])) continue;
            float a = acc[p];
            if (a == 0.0f) cand[nc++] = p;
            a += weight(idf, tf[j], dl[p], avgdl);
            acc[p] = a;
            offer(hp, p, a);
        }
        st->scanned += t[i].n;
    }
    const Py_ssize_t touched = nc; /* cand[0..touched) stays a permutation of every position touched */
    /* phase 2: the rest of the terms, only for chunks that can still reach the k best */
    int sorted = 0;
    for (; i < q; i++) {
        double need = floor_of(hp);
        Py_ssize_t keep = 0;
        for (Py_ssize_t c = 0; c < nc; c++) {
            int32_t p = cand[c];
            if (((double)acc[p] + rest[i]) * (1.0 + MARGIN) >= need) {
                /* kept ones move to the front in their order (a sorted list stays sorted), the
                 * dropped ones behind them, where the zeroing at the end still finds them */
                cand[c] = cand[keep];
                cand[keep++] = p;
            } else {
                acc[p] = -1.0f; /* dropped: a scan below skips it */
            }
        }
        nc = keep;
        st->pruned_terms++;
        if (!nc) break;
        const int32_t *pos = t[i].pos, *tf = t[i].tf;
        float idf = t[i].idf;
        if (nc * LOOKUP_FACTOR < t[i].n) {
            if (!sorted) {
                qsort(cand, (size_t)nc, sizeof(int32_t), cmp_i32);
                sorted = 1;
            }
            Py_ssize_t j = 0;
            for (Py_ssize_t c = 0; c < nc && j < t[i].n; c++) {
                int32_t p = cand[c];
                j = gallop(pos, t[i].n, j, p);
                if (j < t[i].n && pos[j] == p) {
                    float a = acc[p] + weight(idf, tf[j], dl[p], avgdl);
                    acc[p] = a;
                    offer(hp, p, a);
                }
            }
            st->looked_up += nc;
        } else {
            for (Py_ssize_t j = 0; j < t[i].n; j++) {
                int32_t p = pos[j];
                if ((uint32_t)p >= (uint32_t)n_total) continue;
                float a = acc[p];
                if (a > 0.0f) { /* a candidate (dead and filtered-out chunks never became one) */
                    a += weight(idf, tf[j], dl[p], avgdl);
                    acc[p] = a;
                    offer(hp, p, a);
                }
            }
            st->scanned += t[i].n;
        }
    }
    for (Py_ssize_t c = 0; c < touched; c++) acc[cand[c]] = 0.0f; /* the scratch all zero again */
    free(rest);
    return 0;
}

static int cmp_entry(const void *a, const void *b) {
    const Entry *x = a, *y = b;
    if (worse(x, y)) return 1;
    if (worse(y, x)) return -1;
    return 0;
}

typedef struct {
    Py_buffer *views;
    Py_ssize_t n;
} Views;

static void release(Views *v) {
    for (Py_ssize_t i = 0; i < v->n; i++) PyBuffer_Release(&v->views[i]);
    v->n = 0;
}

/* a buffer of n items of `size` bytes (at least `need` items) */
static const void *take(Views *v, PyObject *obj, Py_ssize_t size, Py_ssize_t need, const char *what, Py_ssize_t *n) {
    Py_buffer *b = &v->views[v->n];
    if (PyObject_GetBuffer(obj, b, PyBUF_SIMPLE) < 0) return NULL;
    v->n++;
    if (b->len % size || b->len / size < need) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, expected %zd items of %zd bytes", what, b->len, need, size);
        return NULL;
    }
    if (n) *n = b->len / size;
    return b->buf;
}

PyDoc_STRVAR(topk_doc,
             "topk(terms, dl, avgdl, rowids, n_total, alive, allowed, k) -> (hits, scanned, looked_up)\n\n"
             "terms: [(positions int32, tfs int32, idf, weight upper bound)] in summation order;\n"
             "dl float32 and rowids int64 per position; alive / allowed: one byte per position or None.\n"
             "hits: [(rowid, score)] best first, ties by rowid.");

static PyObject *topk(PyObject *self, PyObject *args) {
    PyObject *terms, *dl_o, *rowids_o, *alive_o, *allowed_o;
    double avgdl;
    Py_ssize_t n_total, k;
    if (!PyArg_ParseTuple(args, "O!OdOnOOn", &PyList_Type, &terms, &dl_o, &avgdl, &rowids_o, &n_total, &alive_o,
                          &allowed_o, &k))
        return NULL;
    if (n_total < 0 || n_total > INT32_MAX || k < 0) {
        PyErr_SetString(PyExc_ValueError, "n_total or k out of range");
        return NULL;
    }
    if (k > n_total) k = n_total; /* never more hits than chunks: the heap is sized by k */
    Py_ssize_t q = PyList_GET_SIZE(terms);
    Views v = {PyMem_Calloc((size_t)(2 * q + 4), sizeof(Py_buffer)), 0};
    Term *t = PyMem_Calloc((size_t)(q ? q : 1), sizeof(Term));
    Heap hp = {NULL, NULL, 0, k, NULL, -1.0f};
    PyObject *out = NULL;
    if (!v.views || !t) {
        PyErr_NoMemory();
        goto done;
    }
    const float *dl = take(&v, dl_o, 4, n_total, "dl", NULL);
    if (!dl) goto done;
    hp.rowids = take(&v, rowids_o, 8, n_total, "rowids", NULL);
    if (!hp.rowids) goto done;
    const uint8_t *alive = NULL, *allowed = NULL;
    if (alive_o != Py_None && !(alive = take(&v, alive_o, 1, n_total, "alive", NULL))) goto done;
    if (allowed_o != Py_None && !(allowed = take(&v, allowed_o, 1, n_total, "allowed", NULL))) goto done;
    for (Py_ssize_t i = 0; i < q; i++) {
        PyObject *it = PyList_GET_ITEM(terms, i);
        PyObject *po, *to;
        double idf, ub;
        if (!PyArg_ParseTuple(it, "OOdd", &po, &to, &idf, &ub)) goto done;
        Py_ssize_t np_, nt;
        if (!(t[i].pos = take(&v, po, 4, 0, "positions", &np_))) goto done;
        if (!(t[i].tf = take(&v, to, 4, np_, "tfs", &nt))) goto done;
        if (nt != np_) {
            PyErr_SetString(PyExc_ValueError, "positions and tfs differ in length");
            goto done;
        }
        t[i].n = np_;
        t[i].idf = (float)idf;
        t[i].ub = ub;
    }
    Stats st = {0, 0, 0};
    if (k > 0 && n_total > 0) {
        Py_ssize_t total = 0;
        for (Py_ssize_t i = 0; i < q; i++) total += t[i].n;
        Scratch *sc = scratch(n_total, total);
        hp.h = PyMem_Malloc((size_t)k * sizeof(Entry));
        if (!hp.h || !sc) {
            PyErr_NoMemory();
            goto done;
        }
        hp.slot = sc->slot; /* all zero */
        int rc;
        Py_BEGIN_ALLOW_THREADS rc = run(t, q, dl, (float)avgdl, alive, allowed, n_total, &hp, &st, sc);
        Py_END_ALLOW_THREADS;
        for (Py_ssize_t i = 0; i < hp.n; i++) hp.slot[hp.h[i].p] = 0; /* only heap entries hold a slot */
        hp.slot = NULL;
        if (rc < 0) {
            PyErr_NoMemory();
            goto done;
        }
        qsort(hp.h, (size_t)hp.n, sizeof(Entry), cmp_entry);
    }
    PyObject *hits = PyList_New(hp.n);
    if (!hits) goto done;
    for (Py_ssize_t i = 0; i < hp.n; i++) {
        PyObject *pair = Py_BuildValue("(Ld)", (long long)hp.h[i].r, (double)hp.h[i].s);
        if (!pair) {
            Py_DECREF(hits);
            goto done;
        }
        PyList_SET_ITEM(hits, i, pair);
    }
    out = Py_BuildValue("(Nnn)", hits, st.scanned, st.looked_up);
done:
    release(&v);
    PyMem_Free(v.views);
    PyMem_Free(t);
    PyMem_Free(hp.h);
    return out;
}

PyDoc_STRVAR(ratio_doc,
             "max_ratio(positions, tfs, dl, start, avgdl) -> float\n\n"
             "max over postings[start:] of tf / (tf + K1 * (1 - B + B * dl / avgdl)), in double:\n"
             "the term's weight bound is idf * (K1 + 1) times it (and grows at most as avgdl does).");

static PyObject *max_ratio(PyObject *self, PyObject *args) {
    PyObject *po, *to, *dlo;
    Py_ssize_t start;
    double avgdl;
    if (!PyArg_ParseTuple(args, "OOOnd", &po, &to, &dlo, &start, &avgdl)) return NULL;
    Py_buffer views[3];
    Views v = {views, 0};
    Py_ssize_t n, nt, nd;
    PyObject *out = NULL;
    const int32_t *pos = take(&v, po, 4, 0, "positions", &n);
    if (!pos) goto done;
    const int32_t *tf = take(&v, to, 4, n, "tfs", &nt);
    if (!tf) goto done;
    const float *dl = take(&v, dlo, 4, 0, "dl", &nd);
    if (!dl) goto done;
    double best = 0.0;
    for (Py_ssize_t j = start < 0 ? 0 : start; j < n; j++) {
        if (pos[j] < 0 || pos[j] >= nd) {
            PyErr_SetString(PyExc_ValueError, "a position is out of range");
            goto done;
        }
        double f = (double)tf[j], r = f / (f + K1 * (1.0 - B + B * (double)dl[pos[j]] / avgdl));
        if (r > best) best = r;
    }
    out = PyFloat_FromDouble(best);
done:
    release(&v);
    return out;
}

static PyMethodDef methods[] = {
    {"topk", topk, METH_VARARGS, topk_doc},
    {"max_ratio", max_ratio, METH_VARARGS, ratio_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bm25", "BM25 top-k with MaxScore pruning.", -1, methods};

PyMODINIT_FUNC PyInit__bm25(void) {
    PyObject *m = PyModule_Create(&module);
    /* the constants compiled in: sparse.py uses the kernel only when they are config's */
    if (m && (PyModule_AddObject(m, "K1", PyFloat_FromDouble(K1)) < 0 ||
              PyModule_AddObject(m, "B", PyFloat_FromDouble(B)) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
