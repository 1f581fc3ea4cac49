/* torchfile.h: PyTorch's torch.save files (the ZIP archive of PyTorch 1.6
 * and later) that hold a state_dict, so that weights move to and from
 * PyTorch without the safetensors package: torch.save(model.state_dict(),
 * "m.pt") loads with --init m.pt, and --save m.pt writes what
 * model.load_state_dict(torch.load("m.pt")) takes.
 * Reading fills the table safetensors_parse fills (runtime/safetensors.h):
 * one entry a tensor, its bytes inside the mapped file, so that callers
 * check and copy either format alike.  data.pkl is read by a small pickle
 * machine that calls nothing: it knows the opcodes of pickle's protocols 2
 * to 5 and recognises collections.OrderedDict, torch._utils'
 * _rebuild_tensor_v2 and _rebuild_parameter and torch's storage classes by
 * name; any other object (a pickled nn.Module, an optimizer's state) is
 * refused, naming it and what to save instead.
 * Does not: read compressed records, tensors that are not contiguous in
 * their storage, big-endian files, or torch.save's format before PyTorch
 * 1.6 (a bare pickle), each refused saying so; or write more than one
 * tensor a storage (each tensor gets its own, as safetensors requires).
 * Invariant: a file that parses has every tensor's bytes inside a stored
 * record of the archive, of the size its shape and dtype need.
 */
#ifndef TORCHFILE_H
#define TORCHFILE_H
#include <stdbool.h>
#include <stddef.h>

#include "runtime/safetensors.h"

/* Whether bytes (size of them) start as a ZIP archive does. */
bool torchfile_is_zip(const void *bytes, size_t size);

/* Whether bytes start as a pickle does (torch.save before PyTorch 1.6, or
 * with _use_new_zipfile_serialization=False). */
bool torchfile_is_legacy(const void *bytes, size_t size);

/* Parse a torch.save archive already in memory (bytes must outlive f) into
 * f, as safetensors_parse does; label names it in messages.  Returns 0, or
 * -1 with a message in err naming the file, the record and byte offset,
 * and what to do. */
int torchfile_parse(struct safetensors_file *f, const void *bytes, size_t size, const char *label, char *err,
		    size_t errlen);

/* Write the tensors to path atomically as torch.save writes a state_dict
 * (an OrderedDict in the order given), each in its own storage.  Returns
 * 0, or -1 with a message in err. */
int torchfile_write(const char *path, const struct safetensors_typed *t, int n, char *err, size_t errlen);

#endif
