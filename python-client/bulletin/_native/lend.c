/* NumPy's data allocator (NEP 49) for an executor: it lends one region of store memory, a
 * pre-faulted spare file the executor mapped, to the first large array the function allocates,
 * so that a large result is computed straight into memory that becomes the store object
 * (bulletin/_native/__init__.py). Everything else goes to the handler that was there before.
 *
 * No Python or NumPy headers: the structs below mirror numpy/ndarraytypes.h (PyDataMem_Handler,
 * version 1), and the executor builds the capsule and sets the handler through ctypes. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

typedef struct {
    void *ctx;
    void *(*malloc)(void *ctx, size_t size);
    void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
    void *(*realloc)(void *ctx, void *ptr, size_t new_size);
    void (*free)(void *ctx, void *ptr, size_t size);
} bl_allocator;

typedef struct {
    char name[127];
    uint8_t version;
    bl_allocator allocator;
} bl_handler_t;

static bl_allocator previous;
static char *region;         /* the lent memory, fixed while offered or lent */
static size_t region_size;
static size_t lend_min;      /* smaller allocations are not worth a store object */
static int offered;          /* the region may be lent now */
static int lent;             /* an array holds the region */
static size_t lent_size;
static char *file_map;       /* the spare file's whole mapping, which the region lies in */
static size_t file_map_size;
static int file_fd = -1;

static void *bl_malloc(void *ctx, size_t size) {
    (void)ctx;
    if (size >= lend_min && size <= region_size && __atomic_load_n(&offered, __ATOMIC_ACQUIRE)) {
        int expected = 0;
        if (__atomic_compare_exchange_n(&lent, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            lent_size = size;
            return region;
        }
    }
    return previous.malloc(previous.ctx, size);
}

static void *bl_calloc(void *ctx, size_t nelem, size_t elsize) {
    (void)ctx;  /* zeroed memory: fresh pages are, a lent region would need a pass */
    return previous.calloc(previous.ctx, nelem, elsize);
}

static void *bl_realloc(void *ctx, void *ptr, size_t new_size) {
    (void)ctx;
    if (ptr != NULL && ptr == (void *)region) {
        if (new_size <= region_size) {
            lent_size = new_size;
            return ptr;
        }
        void *moved = previous.malloc(previous.ctx, new_size);
        if (moved == NULL) {
            return NULL;
        }
        memcpy(moved, ptr, lent_size);
        __atomic_store_n(&lent, 0, __ATOMIC_RELEASE);
        return moved;
    }
    return previous.realloc(previous.ctx, ptr, new_size);
}

static void bl_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    if (ptr != NULL && ptr == (void *)region) {
        __atomic_store_n(&lent, 0, __ATOMIC_RELEASE);
        return;
    }
    previous.free(previous.ctx, ptr, size);
}

bl_handler_t bl_handler = {"bulletin_store_lender", 1,
                           {NULL, bl_malloc, bl_calloc, bl_realloc, bl_free}};
const char bl_capsule_name[] = "mem_handler";

/* A child forked while an array holds the region (multiprocessing in the function) gets the
 * spare file's mapping as a private one: its writes to arrays it inherited stay its own, as they
 * would in memory of its own, instead of reaching the parent's array through the shared file. */
static void private_in_child(void) {
    if (__atomic_load_n(&lent, __ATOMIC_ACQUIRE) && file_map != NULL) {
        mmap(file_map, file_map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, file_fd, 0);
    }
}

/* The handler to fall back on (the one set before ours); once, before ours is set. */
void bl_init(const bl_handler_t *before) {
    previous = before->allocator;
    pthread_atfork(NULL, NULL, private_in_child);
}

/* Offers [base, base + size) to the next allocation of at least `min` bytes; the region lies in
 * the mapping [map, map + map_size) of the file `fd`. 0 when the region offered before is
 * still lent (its address must not change until it is freed). */
int bl_offer(char *base, size_t size, size_t min, char *map, size_t map_size, int fd) {
    if (__atomic_load_n(&lent, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    __atomic_store_n(&offered, 0, __ATOMIC_RELEASE);
    region = base;
    region_size = size;
    lend_min = min;
    file_map = map;
    file_map_size = map_size;
    file_fd = fd;
    __atomic_store_n(&offered, 1, __ATOMIC_RELEASE);
    return 1;
}

/* Stops lending; 1 when an array still holds the region. */
int bl_withdraw(void) {
    __atomic_store_n(&offered, 0, __ATOMIC_RELEASE);
    return __atomic_load_n(&lent, __ATOMIC_ACQUIRE);
}

int bl_lent(void) {
    return __atomic_load_n(&lent, __ATOMIC_ACQUIRE);
}
