/* nest.y - the Nest grammar: a pure parser; every action is one call that builds a node. */
%require "3.8"
%define api.pure full
%define api.prefix {nest_}
%define api.location.type {Loc}
%define parse.error detailed
%define parse.lac full
%locations
%expect 0

%code requires {
#include "nestc.h"
typedef void *yyscan_t;
typedef struct ParseState {
	Arena *a;
	Diag *d;
	Source *src;
	Vec decls;
	int stmt_error; /* a statement of the current function did not parse */
	struct LexState *ls;
	int deep_said;  /* an expression too deep was reported in this declaration */
} ParseState;
}

%code provides {
int nest_lex(NEST_STYPE *lval, Loc *lloc, yyscan_t scanner);
}

%code top {
/* bison's stacks (see MAX_NEST in src/nestc.h): enough for MAX_NEST brackets
 * with the operators between them, and a bound on runs of prefix operators */
#define YYMAXDEPTH 10000
}

%code {
#include <string.h>
#define A (ps->a)
#define YYLLOC_DEFAULT(Cur, Rhs, N)                                  \
	do {                                                         \
		if (N) {                                             \
			(Cur).off = YYRHSLOC(Rhs, 1).off;            \
			(Cur).end = YYRHSLOC(Rhs, N).end;            \
		} else {                                             \
			(Cur).off = (Cur).end = YYRHSLOC(Rhs, 0).end; \
		}                                                    \
	} while (0)
#define NEST_LOCATION_PRINT(File, Loc) ((void)0)

/* Does the next line (after blank and comment lines) begin with "->"? A result
 * type put on the line after the parameters is a common slip under the
 * statement-end rule: the newline after ')' ends the signature. */
static int next_line_begins_with_arrow(const Source *src, int32_t off)
{
	if (!src || off < 0 || (size_t)off > src->len)
		return 0;
	const char *t = src->text + off, *end = src->text + src->len;
	while (t < end && *t != '\n')
		t++;
	while (t < end) {
		while (t < end && (*t == ' ' || *t == '\t' || *t == '\r' || *t == '\n'))
			t++;
		if (t < end && *t == '#') {
			while (t < end && *t != '\n')
				t++;
			continue;
		}
		break;
	}
	return end - t >= 2 && t[0] == '-' && t[1] == '>';
}

static void nest_error(Loc *loc, yyscan_t scanner, ParseState *ps, const char *msg)
{
	(void)scanner;
	if (ps->ls->stop)
		return; /* the lexer said why the file ends early */
	if (!strcmp(msg, "memory exhausted")) {
		/* bison's stack is full (YYMAXDEPTH): a long run of prefix operators */
		error_at(ps->d, *loc, "expression nested too deeply (more than %d levels)", MAX_EXPR_DEPTH);
		return;
	}
	if (strstr(msg, "unexpected end of statement") && next_line_begins_with_arrow(ps->src, loc->off))
		error_at(ps->d, *loc, "%s (a newline after ')' ends the signature: put the '->' "
		         "that begins the next line at the end of this one)", msg);
	else
		error_at(ps->d, *loc, "%s", msg);
}

/* An expression with its children: its height, limited to MAX_EXPR_DEPTH so
 * that no pass after the parser recurses deeper. Past it, one error per
 * declaration, and the expression becomes a 0 (its function is marked
 * broken: no unknown-name errors about what was cut off). */
static Expr *deep(ParseState *ps, Expr *e)
{
	int h = 0;
	if (e->a && e->a->depth > h)
		h = e->a->depth;
	if (e->b && e->b->depth > h)
		h = e->b->depth;
	for (int i = 0; i < e->nargs; i++)
		if (e->args[i] && e->args[i]->depth > h)
			h = e->args[i]->depth;
	e->depth = h + 1;
	if (e->depth <= MAX_EXPR_DEPTH)
		return e;
	if (!ps->deep_said)
		error_at(ps->d, e->loc, "expression nested too deeply (more than %d levels)", MAX_EXPR_DEPTH);
	ps->deep_said = 1;
	ps->stmt_error = 1;
	return mk_int(ps->a, e->loc, 0);
}

static Vec *vnew(ParseState *ps)
{
	return arena_alloc(ps->a, sizeof(Vec));
}

static Vec *vadd(ParseState *ps, Vec *v, void *x)
{
	if (!v)
		v = vnew(ps);
	avec_push(ps->a, v, x);
	return v;
}
}

%param {yyscan_t scanner}
%parse-param {ParseState *ps}

%union {
	int64_t i;
	double f;
	const char *s;
	Expr *e;
	TypeExpr *t;
	Stmt *st;
	Decl *dc;
	Vec *v;
	Field *fld;
	FnArg *fa;
	RegionAttr *ra;
	Ident *id;
}

%token <s> IDENT "identifier"
%token <i> INT "integer"
%token <f> FLOAT "float"
%token <s> STRING "string"
%token <i> DTYPE "dtype"
%token TERM "end of statement"
%token CONST "const" PARAM "param" TYPE "type" FN "fn" EXPORT "export" LET "let"
%token FOR "for" IN "in" RETURN "return" REGION "region"
%token TRUE "true" FALSE "false" INF "inf" PI "pi"
%token DOTDOT ".." ARROW "->" OROR "||" ANDAND "&&" EQEQ "==" NOTEQ "!=" LE "<=" GE ">="

%type <dc> decl fn_decl fn_sig
%type <e> expr postfix primary opt_expr index_arg call_arg dim
%type <t> type base_type
%type <st> stmt
%type <v> decls_opt call_args call_args1 index_args exprs exprs1 dims fields fields1
%type <v> rec_fields rec_fields1 stmts stmts1 block fn_args fn_args1
%type <v> rets ident_list region_attrs region_attrs1 tparams types1
%type <fld> field
%type <fa> fn_arg
%type <ra> region_attr
%type <id> ident

%left OROR
%left ANDAND
%left EQEQ NOTEQ '<' LE '>' GE
%left '+' '-'
%left '*' '/' '%'
%left '@'
%precedence UNARY

%start file

%%

file:
	terms_opt decls_opt                 { (void)$2; }
	;

decls_opt:
	%empty                              { $$ = NULL; }
	| decls_opt decl terms_opt          { if ($2) avec_push(A, &ps->decls, $2); $$ = NULL; ps->deep_said = 0; }
	| decls_opt error terms             { $$ = NULL; ps->deep_said = 0; }
	;

terms_opt:
	%empty
	| terms
	;

terms:
	TERM
	| terms TERM
	;

ident:
	IDENT                               { $$ = mk_ident(A, @1, $1); }
	;

decl:
	CONST IDENT '=' expr TERM           { $$ = mk_const(A, @$, $2, @2, $4); }
	| CONST IDENT '=' DTYPE TERM        { $$ = mk_const_dtype(A, @$, $2, @2, $4); }
	| '@' IDENT '(' STRING ')' terms_opt CONST IDENT '=' expr TERM
	                                    { $$ = mk_meta_const(A, ps->d, @$, $2, @2, $4, NULL, @4, $8, @8, $10); }
	| '@' IDENT '(' STRING ',' IDENT ')' terms_opt CONST IDENT '=' expr TERM
	                                    { $$ = mk_meta_const(A, ps->d, @$, $2, @2, $4, $6, @6, $10, @10, $12); }
	| TYPE IDENT '=' type TERM          { $$ = mk_typedecl(A, @$, $2, @2, NULL, $4); }
	| TYPE IDENT '(' tparams ')' '=' type TERM
	                                    { $$ = mk_typedecl(A, @$, $2, @2, $4, $7); }
	| PARAM IDENT ':' type TERM         { $$ = mk_param(A, @$, $2, @2, $4, NULL); }
	| IDENT IDENT ':' type TERM         { $$ = mk_state(A, ps->d, @$, $1, @1, $2, @2, $4); }
	| PARAM IDENT ':' type '=' STRING TERM
	                                    { $$ = mk_param(A, @$, $2, @2, $4, $6); }
	| fn_decl                           { $$ = $1; }
	| EXPORT fn_decl                    { $$ = mk_export_fn(A, $2, @1); }
	| '@' REGION terms_opt fn_decl      { $$ = mk_region_fn(A, $4, @1, NULL); }
	| '@' REGION '(' region_attrs ')' terms_opt fn_decl
	                                    { $$ = mk_region_fn(A, $7, @1, $4); }
	;

tparams:
	ident                               { $$ = vadd(ps, NULL, $1); }
	| tparams ',' ident                 { $$ = vadd(ps, $1, $3); }
	;

region_attrs:
	%empty                              { $$ = NULL; }
	| region_attrs1 comma_opt           { $$ = $1; }
	;

region_attrs1:
	region_attr                         { $$ = vadd(ps, NULL, $1); }
	| region_attrs1 ',' region_attr     { $$ = vadd(ps, $1, $3); }
	;

region_attr:
	IDENT '=' expr                      { $$ = mk_attr(A, @$, $1, $3); }
	;

comma_opt:
	%empty
	| ','
	;

fn_decl:
	fn_sig block                        { $$ = mk_fn_body(A, $1, @$, $2, ps->stmt_error); ps->stmt_error = 0; }
	| fn_sig IDENT exprs1 block
	                                    { $$ = mk_fn_body(A, mk_where(A, ps->d, $1, $2, @2, $3), @$, $4, ps->stmt_error); ps->stmt_error = 0; }
	;

fn_sig:
	FN IDENT '(' fn_args ')'            { $$ = mk_fn(A, @$, $2, @2, $4, NULL, 0, NULL); }
	| FN IDENT '(' fn_args ')' ARROW type
	                                    { $$ = mk_fn(A, @$, $2, @2, $4, vadd(ps, NULL, $7), 0, NULL); }
	| FN IDENT '(' fn_args ')' ARROW '(' rets ')'
	                                    { $$ = mk_fn(A, @$, $2, @2, $4, $8, 1, NULL); }
	;

rets:
	types1 comma_opt                    { $$ = $1; }
	;

types1:
	type                                { $$ = vadd(ps, NULL, $1); }
	| types1 ',' type                   { $$ = vadd(ps, $1, $3); }
	;

fn_args:
	%empty                              { $$ = NULL; }
	| fn_args1 comma_opt                { $$ = $1; }
	;

fn_args1:
	fn_arg                              { $$ = vadd(ps, NULL, $1); }
	| fn_args1 ',' fn_arg               { $$ = vadd(ps, $1, $3); }
	;

fn_arg:
	IDENT ':' type                      { $$ = mk_fnarg(A, @1, $1, $3); }
	;

type:
	DTYPE                               { $$ = $1 == DT_BOOL ? mk_scalar_type(A, @$, SC_BOOL) : mk_tensor_type(A, @$, $1, NULL, 0); }
	| base_type                         { $$ = $1; }
	;

base_type:
	DTYPE '[' dims ']'                  { $$ = mk_tensor_type(A, @$, $1, $3, 0); }
	| DTYPE '[' '*' ']'                 { $$ = mk_tensor_type(A, @$, $1, NULL, 1); }
	| DTYPE '[' ']'                     { $$ = mk_tensor_type(A, @$, $1, NULL, 0); }
	| IDENT                             { $$ = mk_named_type(A, @$, $1, NULL); }
	| IDENT '(' exprs1 ')'              { $$ = mk_named_type(A, @$, $1, $3); }
	| '{' fields '}'                    { $$ = mk_record_type(A, @$, $2); }
	| base_type '[' dims ']'            { $$ = mk_array_type(A, @$, $1, $3); }
	;

dims:
	dim                                 { $$ = vadd(ps, NULL, $1); }
	| dims ',' dim                      { $$ = vadd(ps, $1, $3); }
	;

dim:
	expr                                { $$ = $1; }
	;

/* Record fields may be separated by commas or newlines, with a trailing one allowed. */
fields:
	terms_opt                           { $$ = NULL; }
	| terms_opt fields1 sep_opt         { $$ = $2; }
	;

fields1:
	field                               { $$ = vadd(ps, NULL, $1); }
	| fields1 sep field                 { $$ = vadd(ps, $1, $3); }
	;

field:
	IDENT ':' type                      { $$ = mk_field_decl(A, @1, $1, $3); }
	| INT ':' type                      { $$ = mk_field_decl(A, @1, arena_printf(A, "%lld", (long long)$1), $3); }
	;

sep:
	',' terms_opt
	| terms
	;

sep_opt:
	%empty
	| sep
	;

block:
	'{' stmts '}'                       { $$ = $2; }
	;

stmts:
	terms_opt                           { $$ = NULL; }
	| terms_opt stmts1 terms_opt        { $$ = $2; }
	;

stmts1:
	stmt                                { $$ = $1 ? vadd(ps, NULL, $1) : vnew(ps); }
	| stmts1 terms stmt                 { $$ = $3 ? vadd(ps, $1, $3) : $1; }
	;

stmt:
	LET ident_list '=' expr             { $$ = mk_let(A, @$, $2, $4, 1); }
	| ident_list '=' expr               { $$ = mk_let(A, @$, $1, $3, 0); }
	| FOR IDENT IN expr DOTDOT expr block
	                                    { $$ = mk_for(A, @$, $2, @2, $4, $6, $7); }
	| RETURN exprs1                     { $$ = mk_return(A, @$, $2); }
	| postfix '[' index_args ']' '=' expr
	                                    { $$ = mk_store(A, @$, mk_index(A, @1, $1, $3), $6); }
	| error                             { $$ = NULL; ps->stmt_error = 1; }
	;

ident_list:
	ident                               { $$ = vadd(ps, NULL, $1); }
	| ident_list ',' ident              { $$ = vadd(ps, $1, $3); }
	;

exprs1:
	expr                                { $$ = vadd(ps, NULL, $1); }
	| exprs1 ',' expr                   { $$ = vadd(ps, $1, $3); }
	;

exprs:
	%empty                              { $$ = NULL; }
	| exprs1 comma_opt                  { $$ = $1; }
	;

expr:
	postfix                             { $$ = $1; }
	| expr OROR expr                    { $$ = deep(ps, mk_binary(A, @2, OPR_OR, $1, $3)); }
	| expr ANDAND expr                  { $$ = deep(ps, mk_binary(A, @2, OPR_AND, $1, $3)); }
	| expr EQEQ expr                    { $$ = deep(ps, mk_compare(A, @2, OPR_EQ, $1, $3)); }
	| expr NOTEQ expr                   { $$ = deep(ps, mk_compare(A, @2, OPR_NE, $1, $3)); }
	| expr '<' expr                     { $$ = deep(ps, mk_compare(A, @2, OPR_LT, $1, $3)); }
	| expr LE expr                      { $$ = deep(ps, mk_compare(A, @2, OPR_LE, $1, $3)); }
	| expr '>' expr                     { $$ = deep(ps, mk_compare(A, @2, OPR_GT, $1, $3)); }
	| expr GE expr                      { $$ = deep(ps, mk_compare(A, @2, OPR_GE, $1, $3)); }
	| expr '+' expr                     { $$ = deep(ps, mk_binary(A, @2, OPR_ADD, $1, $3)); }
	| expr '-' expr                     { $$ = deep(ps, mk_binary(A, @2, OPR_SUB, $1, $3)); }
	| expr '*' expr                     { $$ = deep(ps, mk_binary(A, @2, OPR_MUL, $1, $3)); }
	| expr '/' expr                     { $$ = deep(ps, mk_binary(A, @2, OPR_DIV, $1, $3)); }
	| expr '%' expr                     { $$ = deep(ps, mk_binary(A, @2, OPR_MOD, $1, $3)); }
	| expr '@' expr                     { $$ = deep(ps, mk_binary(A, @2, OPR_MATMUL, $1, $3)); }
	| '-' expr %prec UNARY              { $$ = deep(ps, mk_unary(A, @$, OPR_NEG, $2)); }
	| '!' expr %prec UNARY              { $$ = deep(ps, mk_unary(A, @$, OPR_NOT, $2)); }
	;

postfix:
	primary                             { $$ = $1; }
	| postfix '(' call_args ')'         { $$ = deep(ps, mk_call(A, @$, $1, $3)); }
	| postfix '.' IDENT                 { $$ = deep(ps, mk_field(A, @$, $1, $3, @3)); }
	| postfix '.' INT                   { $$ = deep(ps, mk_field(A, @$, $1, arena_printf(A, "%lld", (long long)$3), @3)); }
	| postfix '[' index_args ']'        { $$ = deep(ps, mk_index(A, @$, $1, $3)); }
	;

primary:
	IDENT                               { $$ = mk_name(A, @$, $1); }
	| INT                               { $$ = mk_int(A, @$, $1); }
	| FLOAT                             { $$ = mk_float(A, @$, $1); }
	| STRING                            { $$ = mk_str(A, @$, $1); }
	| TRUE                              { $$ = mk_bool(A, @$, 1); }
	| FALSE                             { $$ = mk_bool(A, @$, 0); }
	| INF                               { $$ = mk_float(A, @$, __builtin_inf()); }
	| PI                                { $$ = mk_float(A, @$, 3.14159265358979323846); }
	| DTYPE '(' call_args ')'           { $$ = deep(ps, mk_call(A, @$, mk_name(A, @1, dtype_name($1)), $3)); }
	| '(' expr ')'                      { $$ = mk_paren($2); }
	| '[' exprs ']'                     { $$ = deep(ps, mk_list(A, @$, $2)); }
	| '{' rec_fields '}'                { $$ = deep(ps, mk_record(A, @$, $2)); }
	;

rec_fields:
	terms_opt                           { $$ = NULL; }
	| terms_opt rec_fields1 sep_opt     { $$ = $2; }
	;

rec_fields1:
	IDENT ':' expr                      { $$ = vadd(ps, NULL, deep(ps, mk_named(A, @1, $1, $3))); }
	| rec_fields1 sep IDENT ':' expr    { $$ = vadd(ps, $1, deep(ps, mk_named(A, @3, $3, $5))); }
	| INT ':' expr                      { $$ = vadd(ps, NULL, deep(ps, mk_named(A, @1, arena_printf(A, "%lld", (long long)$1), $3))); }
	| rec_fields1 sep INT ':' expr      { $$ = vadd(ps, $1, deep(ps, mk_named(A, @3, arena_printf(A, "%lld", (long long)$3), $5))); }
	;

call_args:
	%empty                              { $$ = NULL; }
	| call_args1 comma_opt              { $$ = $1; }
	;

call_args1:
	call_arg                            { $$ = vadd(ps, NULL, $1); }
	| call_args1 ',' call_arg           { $$ = vadd(ps, $1, $3); }
	;

call_arg:
	expr                                { $$ = $1; }
	| IDENT '=' expr                    { $$ = deep(ps, mk_named(A, @1, $1, $3)); }
	;

index_args:
	index_arg                           { $$ = vadd(ps, NULL, $1); }
	| index_args ',' index_arg          { $$ = vadd(ps, $1, $3); }
	;

index_arg:
	expr                                { $$ = $1; }
	| opt_expr ':' opt_expr             { $$ = deep(ps, mk_slice(A, @$, $1, $3)); }
	;

opt_expr:
	%empty                              { $$ = NULL; }
	| expr                              { $$ = $1; }
	;

%%

#include "lex.h"

Module *parse_module(Arena *a, Diag *d, Source *src)
{
	ParseState ps = {.a = a, .d = d, .src = src};
	if (src->nul_off >= 0) {
		/* not a text file: one message, where it stops being one */
		error_at(d, (Loc){src->nul_off, src->nul_off + 1}, "a NUL byte (not a text file?)");
		Module *m = arena_alloc(a, sizeof *m);
		m->src = src;
		return m;
	}
	struct LexState ls = {.arena = a, .diag = d};
	ps.ls = &ls;
	yyscan_t scanner;
	if (nest_lex_init_extra(&ls, &scanner))
		ice("cannot create the scanner");
	YY_BUFFER_STATE buf = nest__scan_bytes(src->text, (int)src->len, scanner);
	nest_parse(scanner, &ps);
	nest__delete_buffer(buf, scanner);
	nest_lex_destroy(scanner);
	Module *m = arena_alloc(a, sizeof *m);
	m->src = src;
	m->decls = (Decl **)ps.decls.v;
	m->ndecls = ps.decls.n;
	return m;
}
