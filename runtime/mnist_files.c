/* mnist_files.c: where an MNIST-format dataset's files are (see
 * mnist_files.h).  Shared by the dataset reader and the compiler, which
 * reports a missing dataset at the data statement before any run starts.
 */
#include "runtime/mnist_files.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/util.h"

/* path of dir/name[suffix] into buf if it exists: 1 found, 0 not, -1 too
 * long, 2 where the only one there is a symbolic link to nothing (buf) */
static int find_file(char *buf, size_t len, const char *dir, const char *name)
{
	static const char *const suffix[] = { "", ".gz" };
	int dangling = -1;
	struct stat st;
	for (int i = 0; i < 2; i++) {
		int w = snprintf(buf, len, "%s/%s%s", dir, name, suffix[i]);
		if (w < 0 || (size_t)w >= len)
			return -1;
		if (access(buf, F_OK) == 0)
			return 1;
		if (dangling < 0 && lstat(buf, &st) == 0 && S_ISLNK(st.st_mode))
			dangling = i;
	}
	if (dangling < 0)
		return 0;
	snprintf(buf, len, "%s/%s%s", dir, name, suffix[dangling]);
	return 2;
}

int mnist_find(const char *root, const char *split, char *images, char *labels, size_t len, char *err, size_t errlen)
{
	const char *prefix;
	if (strcmp(split, "train") == 0)
		prefix = "train";
	else if (strcmp(split, "test") == 0)
		prefix = "t10k";
	else
		return util_fail(err, errlen, "%s: unknown split '%s'; use \"train\" or \"test\"", root, split);
	/* torchvision keeps the files under root/<class name>/raw/ */
	static const char *const layouts[] = { "", "/MNIST/raw", "/FashionMNIST/raw" };
	char images_name[64], labels_name[64], dir[4096];
	snprintf(images_name, sizeof images_name, "%s-images-idx3-ubyte", prefix);
	snprintf(labels_name, sizeof labels_name, "%s-labels-idx1-ubyte", prefix);
	char broken[4200] = ""; /* the first symbolic link to nothing met */
	for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
		int w = snprintf(dir, sizeof dir, "%s%s", root, layouts[i]);
		if (w < 0 || (size_t)w >= sizeof dir)
			return util_fail(err, errlen, "%.200s...: dataset root path too long", root);
		int fi = find_file(images, len, dir, images_name);
		int fl = find_file(labels, len, dir, labels_name);
		if (fi < 0 || fl < 0)
			return util_fail(err, errlen, "%.200s...: dataset root path too long", root);
		if (fi == 1 && fl == 1)
			return 0;
		bool here = fi + fl >= 3; /* a link to nothing and the other file there (or broken too): the pair's folder */
		if ((fi == 2 || fl == 2) && (here || !broken[0]))
			snprintf(broken, sizeof broken, "%s", fi == 2 ? images : labels);
		if ((fi == 2 || fl == 2) && here)
			break;
		if (fi == 1 || fl == 1)
			return util_fail(err, errlen, "%s: found %s but not %s/%s[.gz]; re-download the dataset",
				    dir, fi ? images : labels, dir, fi ? labels_name : images_name);
	}
	if (broken[0]) {
		char to[4096];
		ssize_t n = readlink(broken, to, sizeof to - 1);
		to[n > 0 ? n : 0] = 0;
		return util_fail(err, errlen, "%s is a symbolic link to %s, which does not exist (a dangling link); point it at the "
			    "file or re-download the dataset", broken, to);
	}
	return util_fail(err, errlen, "%s: no %s split of MNIST found; tried %s/%s[.gz], %s/MNIST/raw/%s[.gz] and "
		    "%s/FashionMNIST/raw/%s[.gz] (and the same for the labels); download the dataset there "
		    "or point root at it", root, split, root, images_name, root, images_name, root, images_name);
}
