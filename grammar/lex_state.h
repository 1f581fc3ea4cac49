/* lex_state.h: what the scanner and the parser share about one source:
 * the position, the open brackets (to say which one a missing closer
 * belongs to, and to know when a newline ends a statement) and the text of
 * the last token (for "unexpected identifier 'foo'").  Internal to grammar/.
 */
#ifndef LEX_STATE_H
#define LEX_STATE_H
#include <stdbool.h>

#include "grammar/ast.h"

enum { LEX_MAX_NEST = 100 };

struct lex_state {
	struct arena *arena;
	struct diag *diag;
	const struct source *src;
	int line, col;
	struct { char ch; struct loc loc; } open[LEX_MAX_NEST];
	int nopen;       /* brackets open now, innermost last */
	int paren_depth; /* ( and [ since the last { or }: newlines inside are blank */
	bool nesting_reported;
	bool sent_final_nl;
	bool last_was_nl;
	bool cr_reported;  /* a carriage return without a line feed */
	/* a string ran to the end of the line: the next parse error is its echo
	 * when the string was inside brackets it swallowed the closer of, or
	 * when it is on the string's line */
	bool open_string;
	int open_string_line, open_string_depth;
	const char *last_text;
	struct lex_hold *hold; /* lookahead past a newline (ast.c) */
	struct ast_file *file;
};
#endif
