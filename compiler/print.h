/* print.h: the human views of a plan.  `trainc print` shows the module
 * tree as PyTorch prints the wrapped model, with shapes, parameter counts,
 * devices and FSDP units, then the memory per rank and the training
 * settings as PyTorch constructor calls; `trainc graph` writes
 * Graphviz dot.  Both are pure functions of the plan: golden tests pin them.
 */
#ifndef PRINT_H
#define PRINT_H
#include <stdio.h>

#include "compiler/ir.h"

void print_plan(FILE *out, const struct plan *p);
void print_graph(FILE *out, const struct plan *p);
/* The training settings in force (print_plan's last part; nothing where
 * the file has no train section). */
void print_training(FILE *out, const struct plan *p);
/* "1,199,882" */
const char *print_count(int64_t v, char *buf, int n);
#endif
