/*
 * File identities across a template start (docs/runtime.md "New agents from
 * a template"; built by file_identities.ts, loaded with LD_PRELOAD into every
 * process of a fixed-layout agent).
 *
 * A framework restored from a template holds in memory the identity (st_dev,
 * st_ino) of files it had open or had checked at the dump (OpenClaw keys its
 * SQLite state database by `file:<dev>:<ino>` and compares config files'
 * identities before it trusts them). The restored agent's files are its own
 * copies: the same paths, other inode numbers. This library answers the stat
 * family (glibc's functions, and syscall() for statx, which libuv and Rust's
 * std call that way) with the template's identities for those files, and the
 * template's own inode numbers with the agent's (the swaps are a permutation:
 * no two files ever show the same identity).
 *
 * The table of swaps is written by the service into a restored copy's memory
 * images (never at run time: no file, no lock): TABLE_PAGES pages, each
 * starting with MAGIC and its page number, made present at load so that a
 * dump holds them. Until then every count is 0 and each call costs one load.
 *
 * Random state: every copy restored from one template would go on with the
 * template's random generators. The copy's first table page also gets a new
 * `epoch`; a thread of this library, waiting on that word (a futex) since the
 * process began, wakes when CRIU restarts its wait on a changed value and
 * reseeds OpenSSL's generator (RAND_add, from getrandom(); Node.js exports
 * it), with no lock of the process held. What Node.js and V8 keep in their
 * own memory (crypto.randomUUID's batch, Math.random's state) it cannot reach.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define PAGE 4096
#define TABLE_PAGES 16
#define HEADER 32
#define PER_PAGE ((PAGE - HEADER) / 32)

struct swap {
  uint64_t from_dev, from_ino, to_dev, to_ino;
};

struct page {
  /* MAGIC, then the page's number and how many swaps it holds. */
  unsigned char magic[16];
  uint32_t index;
  volatile uint32_t count;
  /* Page 0's: changed by the service in each copy (the reseed's cue). */
  volatile uint32_t epoch;
  uint32_t reserved;
  struct swap swaps[PER_PAGE];
};

static struct page table[TABLE_PAGES] __attribute__((aligned(PAGE)));

/* Kept out of the library's read-only data as one string (file_identities.ts has it whole). */
static const unsigned char MAGIC_XORED[16] = {0x0b, 0x2d, 0x2f, 0x24, 0x3e, 0x02, 0x25, 0x39,
                                              0x3e, 0x0c, 0x23, 0x26, 0x2f, 0x03, 0x2e, 0x7b};

typedef void (*rand_add_fn)(const void *, int, double);
static rand_add_fn rand_add;

/* A restored copy's OpenSSL generator reseeded from the kernel. */
static void reseed(void) {
  unsigned char seed[48];
  if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed)) return;
  rand_add(seed, sizeof(seed), (double)sizeof(seed));
  explicit_bzero(seed, sizeof(seed));
}

static void *await_epoch(void *unused) {
  (void)unused;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  uint32_t seen = table[0].epoch;
  for (;;) {
    uint32_t now = __atomic_load_n(&table[0].epoch, __ATOMIC_ACQUIRE);
    if (now == seen) {
      /* Returns at once when the value differs (a restart after a restore re-checks it). */
      syscall(SYS_futex, &table[0].epoch, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
      continue;
    }
    seen = now;
    reseed();
  }
  return NULL;
}

/* dl_iterate_phdr's callback: 1 when the address is in the first object (the program), else 2. */
static int in_program(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  uintptr_t address = *(uintptr_t *)data;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *segment = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + segment->p_vaddr;
    if (segment->p_type == PT_LOAD && address >= start && address < start + segment->p_memsz) {
      return 1;
    }
  }
  return 2;
}

__attribute__((constructor)) static void fill_headers(void) {
  for (int p = 0; p < TABLE_PAGES; p++) {
    for (int i = 0; i < 16; i++) table[p].magic[i] = MAGIC_XORED[i] ^ 0x4a;
    table[p].index = (uint32_t)p;
    /* Every page written: present at a dump, so the service finds them all. */
    memset(table[p].swaps, 0, sizeof(table[p].swaps));
  }
  /*
   * Only a program with OpenSSL built in (Node.js exports it) gets the
   * thread: others (bwrap, sh, setpriv on the way in: setpriv aborts once it
   * has a second thread; the tools an agent runs, curl or ssh with a shared
   * libcrypto) are not what a template holds. Looked up through the
   * program's handle: RTLD_DEFAULT depends on the caller's address.
   */
  void *program = dlopen(NULL, RTLD_LAZY);
  rand_add = program ? (rand_add_fn)dlsym(program, "RAND_add") : NULL;
  uintptr_t address = (uintptr_t)rand_add;
  if (!rand_add || dl_iterate_phdr(in_program, &address) != 1) return;
  pthread_attr_t attr;
  pthread_t thread;
  if (pthread_attr_init(&attr) != 0) return;
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_create(&thread, &attr, await_epoch, NULL);
  pthread_attr_destroy(&attr);
}

/* The identity to show for (dev, ino): 1 when it is swapped. */
static int swapped(uint64_t *dev, uint64_t *ino) {
  for (int p = 0; p < TABLE_PAGES; p++) {
    uint32_t count = table[p].count;
    if (count == 0) return 0;
    if (count > PER_PAGE) count = PER_PAGE;
    for (uint32_t i = 0; i < count; i++) {
      const struct swap *s = &table[p].swaps[i];
      if (s->from_ino == *ino && s->from_dev == *dev) {
        *dev = s->to_dev;
        *ino = s->to_ino;
        return 1;
      }
    }
  }
  return 0;
}

static void fix_stat(struct stat *st) {
  if (table[0].count == 0) return;
  uint64_t dev = st->st_dev, ino = st->st_ino;
  if (swapped(&dev, &ino)) {
    st->st_dev = dev;
    st->st_ino = ino;
  }
}

static void fix_statx(struct statx *stx) {
  if (table[0].count == 0) return;
  uint64_t dev = makedev(stx->stx_dev_major, stx->stx_dev_minor), ino = stx->stx_ino;
  if (swapped(&dev, &ino)) {
    stx->stx_dev_major = major(dev);
    stx->stx_dev_minor = minor(dev);
    stx->stx_ino = ino;
  }
}

/* The next definition of `name` (glibc's), looked up once. */
#define REAL(name)                         \
  static __typeof__(&name) real_##name;    \
  if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

/* On x86_64 struct stat and struct stat64 are one layout. */
#define STAT_PATH(name, type)                       \
  int name(const char *path, struct type *st) {     \
    REAL(name);                                     \
    int rc = real_##name(path, st);                 \
    if (rc == 0) fix_stat((struct stat *)st);       \
    return rc;                                      \
  }
STAT_PATH(stat, stat)
STAT_PATH(stat64, stat64)
STAT_PATH(lstat, stat)
STAT_PATH(lstat64, stat64)

#define STAT_FD(name, type)                    \
  int name(int fd, struct type *st) {          \
    REAL(name);                                \
    int rc = real_##name(fd, st);              \
    if (rc == 0) fix_stat((struct stat *)st);  \
    return rc;                                 \
  }
STAT_FD(fstat, stat)
STAT_FD(fstat64, stat64)

#define STAT_AT(name, type)                                               \
  int name(int dirfd, const char *path, struct type *st, int flags) {     \
    REAL(name);                                                           \
    int rc = real_##name(dirfd, path, st, flags);                         \
    if (rc == 0) fix_stat((struct stat *)st);                             \
    return rc;                                                            \
  }
STAT_AT(fstatat, stat)
STAT_AT(fstatat64, stat64)

/* glibc before 2.33 inlined stat() into these (Node.js's official binary calls them). */
int __xstat(int, const char *, struct stat *);
int __xstat64(int, const char *, struct stat *);
int __lxstat(int, const char *, struct stat *);
int __lxstat64(int, const char *, struct stat *);
int __fxstat(int, int, struct stat *);
int __fxstat64(int, int, struct stat *);
int __fxstatat(int, int, const char *, struct stat *, int);
int __fxstatat64(int, int, const char *, struct stat *, int);

#define XSTAT_PATH(name)                                  \
  int name(int ver, const char *path, struct stat *st) {  \
    REAL(name);                                           \
    int rc = real_##name(ver, path, st);                  \
    if (rc == 0) fix_stat(st);                            \
    return rc;                                            \
  }
XSTAT_PATH(__xstat)
XSTAT_PATH(__xstat64)
XSTAT_PATH(__lxstat)
XSTAT_PATH(__lxstat64)

#define XSTAT_FD(name)                          \
  int name(int ver, int fd, struct stat *st) {  \
    REAL(name);                                 \
    int rc = real_##name(ver, fd, st);          \
    if (rc == 0) fix_stat(st);                  \
    return rc;                                  \
  }
XSTAT_FD(__fxstat)
XSTAT_FD(__fxstat64)

#define XSTAT_AT(name)                                                         \
  int name(int ver, int dirfd, const char *path, struct stat *st, int flags) { \
    REAL(name);                                                                \
    int rc = real_##name(ver, dirfd, path, st, flags);                         \
    if (rc == 0) fix_stat(st);                                                 \
    return rc;                                                                 \
  }
XSTAT_AT(__fxstatat)
XSTAT_AT(__fxstatat64)

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *stx) {
  REAL(statx);
  int rc = real_statx(dirfd, path, flags, mask, stx);
  if (rc == 0) fix_statx(stx);
  return rc;
}

/* libuv (Node.js's fs) and Rust's std call statx through syscall(). */
long syscall(long number, ...) {
  REAL(syscall);
  va_list list;
  va_start(list, number);
  long a = va_arg(list, long), b = va_arg(list, long), c = va_arg(list, long);
  long d = va_arg(list, long), e = va_arg(list, long), f = va_arg(list, long);
  va_end(list);
  long rc = real_syscall(number, a, b, c, d, e, f);
  if (rc == 0) {
    if (number == SYS_statx) fix_statx((struct statx *)e);
    else if (number == SYS_newfstatat) fix_stat((struct stat *)c);
    else if (number == SYS_stat || number == SYS_lstat || number == SYS_fstat)
      fix_stat((struct stat *)b);
  }
  return rc;
}
