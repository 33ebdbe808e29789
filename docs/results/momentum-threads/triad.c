#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
  const long n = 64L << 20;
  float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
#pragma omp parallel for
  for (long i = 0; i < n; ++i) {
    a[i] = 0;
    b[i] = 1;
    c[i] = 2;
  }
  double best = 1e9;
  for (int r = 0; r < 10; ++r) {
    double t = omp_get_wtime();
#pragma omp parallel for
    for (long i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
    t = omp_get_wtime() - t;
    if (t < best) best = t;
  }
  printf("threads %d triad min %.1f ms (%.1f GB/s counting 3 arrays)\n", omp_get_max_threads(),
         best * 1e3, 3.0 * n * 4 / best / 1e9);
  return a[7] == 0;
}
