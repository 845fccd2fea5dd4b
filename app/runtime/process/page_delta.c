/*
 * page_delta: the page comparison of a checkpoint delta (checkpoint_delta.ts).
 *
 *   page_delta <dump pages image> <template pages image> <kept pages out>
 *
 * Reads from stdin little-endian uint32 triples (dump page, template page,
 * count): the dump's pages that have a counterpart at the same address in
 * the template's image. Each such page equal to its counterpart, byte for
 * byte, is the template's; every other page of the dump is kept: written,
 * in order, to the output file. Writes to stdout one byte per page of the
 * dump: 1 the template's, 0 kept. Exits 2 on a triple outside either image.
 *
 * Both images are mapped, not read: the comparison reads the page cache in
 * place, where Node's reads copied 2.2 GB per OpenClaw sleep.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096

static const unsigned char *map_file(const char *path, size_t *pages) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat info;
  if (fstat(fd, &info) != 0) {
    close(fd);
    return NULL;
  }
  *pages = (size_t)info.st_size / PAGE;
  if (*pages == 0) {
    close(fd);
    return (const unsigned char *)"";
  }
  void *mapped = mmap(NULL, *pages * PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) return NULL;
  madvise(mapped, *pages * PAGE, MADV_SEQUENTIAL);
  return mapped;
}

static int write_all(int fd, const unsigned char *bytes, size_t length) {
  while (length > 0) {
    ssize_t written = write(fd, bytes, length);
    if (written < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    bytes += written;
    length -= (size_t)written;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: page_delta <dump pages> <template pages> <kept pages out>\n");
    return 1;
  }
  size_t dump_pages = 0, template_pages = 0;
  const unsigned char *dump = map_file(argv[1], &dump_pages);
  const unsigned char *template = map_file(argv[2], &template_pages);
  if (!dump || !template) {
    perror("page_delta: mapping an image");
    return 1;
  }
  unsigned char *same = calloc(dump_pages ? dump_pages : 1, 1);
  if (!same) return 1;
  uint32_t triple[3];
  while (fread(triple, sizeof triple, 1, stdin) == 1) {
    uint64_t from = triple[0], to = triple[1], count = triple[2];
    if (from + count > dump_pages || to + count > template_pages) {
      fprintf(stderr, "page_delta: pages %llu+%llu outside an image\n",
              (unsigned long long)from, (unsigned long long)count);
      return 2;
    }
    for (uint64_t page = 0; page < count; page++) {
      same[from + page] =
          memcmp(dump + (from + page) * PAGE, template + (to + page) * PAGE, PAGE) == 0;
    }
  }
  // Never through a link: the output is a new file in the dump's own folder.
  int out = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (out < 0) {
    perror("page_delta: opening the output");
    return 1;
  }
  // Runs of kept pages, one write each, straight from the mapped dump.
  for (size_t page = 0; page < dump_pages;) {
    if (same[page]) {
      page++;
      continue;
    }
    size_t end = page;
    while (end < dump_pages && !same[end]) end++;
    if (write_all(out, dump + page * PAGE, (end - page) * PAGE) != 0) {
      perror("page_delta: writing kept pages");
      return 1;
    }
    page = end;
  }
  if (close(out) != 0 || write_all(STDOUT_FILENO, same, dump_pages) != 0) {
    perror("page_delta: finishing");
    return 1;
  }
  return 0;
}
