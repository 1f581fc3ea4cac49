/* parser.y: the grammar of the .net language.
 * Every action is one call to an ast_* constructor: the parser builds the
 * tree as written and gives no meaning to any name.  Errors recover at the
 * next statement so one run reports several mistakes.
 */
%define api.pure full
%define api.prefix {net_}
%define api.location.type {struct loc}
%define parse.error custom
%define parse.lac full
%locations
%expect 0
%param {yyscan_t scanner}
%parse-param {struct lex_state *ls}

%code requires {
#include "grammar/ast.h"
#include "grammar/lex_state.h"
typedef void *yyscan_t;
}

%code provides {
int net_lex(NET_STYPE *lval, NET_LTYPE *lloc, yyscan_t scanner);
void net_error(NET_LTYPE *at, yyscan_t scanner, struct lex_state *ls, const char *msg);
}

%code {
#include <string.h>

#include "grammar/arena.h"
#include "grammar/diag.h"

#define A (ls->arena)
#define YYLLOC_DEFAULT(cur, rhs, n) \
	((cur) = (n) ? loc_span(YYRHSLOC(rhs, 1), YYRHSLOC(rhs, n)) : YYRHSLOC(rhs, 0))
}

%union {
	int64_t i;
	double f;
	const char *s;
	struct ast *e;
	struct ast_arg *arg;
	struct ast_annot *annot;
	struct ast_stmt *stmt;
	struct ast_section *sec;
}

%token <s> IDENT "identifier" STRING "string"
%token <i> INT "integer"
%token <f> FLOAT "number"
%token TRUE "true" FALSE "false" NL "end of line"
%token END 0 "end of file"

%left '+' '-'
%left '*' '/' '%'
%precedence NEG

%type <e> expr primary value count
%type <arg> args arglist arg items
%type <annot> annots
%type <stmt> stmt stmt_items stmt_seq body
%type <sec> section sections sec_head

%%

file:       sections                         { ls->file->sections = $1; }
;
sections:   %empty                           { $$ = NULL; }
          | sections sep                     { $$ = $1; }
          | sections section sep             { $$ = ast_sections_append($1, $2); }
          | sections error sep               { $$ = $1; }
;
section:    sec_head                         { $$ = $1; }
          | sec_head '{' stmt_seq '}'        { $$ = ast_section_body($1, @2, $3); }
;
sec_head:   IDENT                            { $$ = ast_section(A, $1, @1); }
          | IDENT IDENT                      { $$ = ast_section_name(ast_section(A, $1, @1), $2, @2, false); }
          | IDENT STRING                     { $$ = ast_section_name(ast_section(A, $1, @1), $2, @2, true); }
          | IDENT IDENT '(' args ')'         { $$ = ast_section_params(ast_section_name(ast_section(A, $1, @1), $2, @2, false), $4); }
;
body:       %empty                           { $$ = NULL; }
          | '{' stmt_seq '}'                 { $$ = ast_body(A, @1, $2); }
;
stmt_seq:   seps_opt                         { $$ = NULL; }
          | seps_opt stmt_items seps_opt     { $$ = $2; }
;
stmt_items: stmt                             { $$ = $1; }
          | stmt_items seps stmt             { $$ = ast_stmts_append($1, $3); }
;
seps_opt:   %empty | seps ;
seps:       sep | seps sep ;
sep:        NL | ';' ;

stmt:       value annots body                { $$ = ast_stmt_finish(ast_stmt(A, @$, NULL, @1, $1), $2, $3); }
          | IDENT '=' value annots body      { $$ = ast_stmt_finish(ast_stmt(A, @$, $1, @1, $3), $4, $5); }
          | error                            { $$ = NULL; }
;
value:      expr                             { $$ = $1; }
          | IDENT count                      { $$ = ast_call(A, @$, $1, @1, ast_arg(A, NULL, @2, $2)); }
;
count:      INT                              { $$ = ast_int(A, @1, $1); }
          | IDENT                            { $$ = ast_name(A, @1, $1); }
;
annots:     %empty                           { $$ = NULL; }
          | annots '@' IDENT                 { $$ = ast_annots_append($1, ast_annot(A, loc_span(@2, @3), $3, NULL)); }
          | annots '@' IDENT '(' args ')'    { $$ = ast_annots_append($1, ast_annot(A, loc_span(@2, @3), $3, $5)); }
;
expr:       expr '+' expr                    { $$ = ast_binop(A, @2, '+', $1, $3); }
          | expr '-' expr                    { $$ = ast_binop(A, @2, '-', $1, $3); }
          | expr '*' expr                    { $$ = ast_binop(A, @2, '*', $1, $3); }
          | expr '/' expr                    { $$ = ast_binop(A, @2, '/', $1, $3); }
          | expr '%' expr                    { $$ = ast_binop(A, @2, '%', $1, $3); }
          | '-' expr %prec NEG               { $$ = ast_neg(A, @$, $2); }
          | primary                          { $$ = $1; }
;
primary:    INT                              { $$ = ast_int(A, @1, $1); }
          | FLOAT                            { $$ = ast_float(A, @1, $1); }
          | STRING                           { $$ = ast_string(A, @1, $1); }
          | TRUE                             { $$ = ast_bool(A, @1, true); }
          | FALSE                            { $$ = ast_bool(A, @1, false); }
          | IDENT                            { $$ = ast_name(A, @1, $1); }
          | IDENT '(' args ')'               { $$ = ast_call(A, @1, $1, @1, $3); }
          | '(' expr ')'                     { $$ = $2; }
          | '(' expr ',' ')'                 { $$ = ast_seq(A, @$, AST_TUPLE, ast_arg(A, NULL, @2, $2)); }
          | '(' expr ',' items ')'           { $$ = ast_seq(A, @$, AST_TUPLE, ast_args_append(ast_arg(A, NULL, @2, $2), $4)); }
          | '(' expr ',' items ',' ')'       { $$ = ast_seq(A, @$, AST_TUPLE, ast_args_append(ast_arg(A, NULL, @2, $2), $4)); }
          | '[' ']'                          { $$ = ast_seq(A, @$, AST_LIST, NULL); }
          | '[' items ']'                    { $$ = ast_seq(A, @$, AST_LIST, $2); }
          | '[' items ',' ']'                { $$ = ast_seq(A, @$, AST_LIST, $2); }
;
items:      expr                             { $$ = ast_arg(A, NULL, @1, $1); }
          | items ',' expr                   { $$ = ast_args_append($1, ast_arg(A, NULL, @3, $3)); }
;
args:       %empty                           { $$ = NULL; }
          | arglist                          { $$ = $1; }
          | arglist ','                      { $$ = $1; }
;
arglist:    arg                              { $$ = $1; }
          | arglist ',' arg                  { $$ = ast_args_append($1, $3); }
;
arg:        expr                             { $$ = ast_arg(A, NULL, @1, $1); }
          | IDENT '=' expr                   { $$ = ast_arg(A, $1, @1, $3); }
;

%%

static const char *token_text(const yypcontext_t *pc, struct lex_state *ls, char *buf, size_t n)
{
	yysymbol_kind_t t = yypcontext_token(pc);
	switch (t) {
	case YYSYMBOL_IDENT: snprintf(buf, n, "name '%s'", ls->last_text); break;
	case YYSYMBOL_INT: case YYSYMBOL_FLOAT: snprintf(buf, n, "number %s", ls->last_text); break;
	case YYSYMBOL_STRING: snprintf(buf, n, "string %s", ls->last_text); break;
	default: snprintf(buf, n, "%s", yysymbol_name(t)); break;
	}
	return buf;
}

/* The character of a one-character token, else 0. */
static char sym_char(yysymbol_kind_t t)
{
	const char *name = yysymbol_name(t);
	return name[0] == '\'' && name[1] && name[2] == '\'' ? name[1] : 0;
}

static int yyreport_syntax_error(const yypcontext_t *pc, yyscan_t scanner, struct lex_state *ls)
{
	(void)scanner;
	yysymbol_kind_t expected[YYNTOKENS];
	int n = yypcontext_expected_tokens(pc, expected, YYNTOKENS);
	char got[160], want[256] = "";
	token_text(pc, ls, got, sizeof got);
	yysymbol_kind_t t = yypcontext_token(pc);
	struct loc at = *yypcontext_location(pc);
	if (ls->nesting_reported)
		return 0; /* one message about runaway nesting is enough */
	if (ls->open_string && (ls->open_string_depth > 0 || at.line == ls->open_string_line)) {
		ls->open_string = false;
		return 0; /* the unclosed string swallowed what is missing here */
	}
	/* a missing closer is the likeliest mistake when one is possible here and
	 * what came instead ends a line, the file or another bracket */
	char closer = 0;
	if (ls->nopen > 0) {
		char o = ls->open[ls->nopen - 1].ch;
		closer = o == '(' ? ')' : o == '[' ? ']' : '}';
	}
	bool closer_ok = false;
	for (int i = 0; i < n; i++) {
		const char *name = yysymbol_name(expected[i]);
		if (closer && name[0] == '\'' && name[1] == closer)
			closer_ok = true;
	}
	char tc = sym_char(t);
	bool ends = t == YYSYMBOL_NL || t == YYSYMBOL_YYEOF || tc == ')' || tc == ']' || tc == '}' ||
		    (closer != '}' && tc != ',' && tc != '=');
	if (closer_ok && ends && (closer != '}' || t == YYSYMBOL_YYEOF)) {
		diag_error(ls->diag, at, "expected '%c' before %s", closer, got);
		diag_note(ls->diag, ls->open[ls->nopen - 1].loc, "to close this '%c'", ls->open[ls->nopen - 1].ch);
		return 0;
	}
	if (tc == '}' && ls->nopen == 0) {
		diag_error(ls->diag, at, "unmatched '}'");
		return 0;
	}
	size_t len = 0;
	for (int i = 0; n > 0 && n <= 5 && i < n; i++) {
		const char *name = yysymbol_name(expected[i]);
		len += (size_t)snprintf(want + len, sizeof want - len, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", name);
	}
	if (want[0])
		diag_error(ls->diag, at, "expected %s, found %s", want, got);
	else
		diag_error(ls->diag, at, "unexpected %s", got);
	return 0;
}

void net_error(NET_LTYPE *at, yyscan_t scanner, struct lex_state *ls, const char *msg)
{
	(void)scanner;
	if (ls->nesting_reported)
		return;
	if (strstr(msg, "exhausted"))
		diag_error(ls->diag, *at, "nested too deeply for the parser; split the expression");
	else
		diag_error(ls->diag, *at, "%s", msg);
}
