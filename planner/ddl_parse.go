package planner

import (
	"strings"
)

// Stmt is one statement of the pool language as Parse returns it; Apply
// carries it out on a Model.
type Stmt interface {
	// Pos is where the statement starts.
	Pos() Pos
	stmt()
}

// word is a name or a parameter key with its place in the file.
type word struct {
	text string
	pos  Pos
}

// value is the right-hand side of KEY = VALUE: a number, a string or a
// bare word, kept as written so messages can quote it.
type value struct {
	kind tokenKind
	text string
	pos  Pos
}

// setting is one KEY = VALUE inside WITH (…) or SET (…). hasValue is
// false for a bare KEY, which YQL's grammar allows and Apply refuses.
type setting struct {
	key      word
	val      value
	hasValue bool
}

// createStmt is CREATE RESOURCE POOL [CLASSIFIER] name [WITH (…)].
type createStmt struct {
	at         Pos
	classifier bool
	name       word
	settings   []setting
}

// alterStmt is ALTER RESOURCE POOL [CLASSIFIER] name followed by one or
// more SET (…) and RESET (…) actions, separated by commas.
type alterStmt struct {
	at         Pos
	classifier bool
	name       word
	set        []setting
	reset      []word
}

// dropStmt is DROP RESOURCE POOL [CLASSIFIER] name.
type dropStmt struct {
	at         Pos
	classifier bool
	name       word
}

// grantStmt is GRANT … ON … TO … [WITH GRANT OPTION] or
// REVOKE [GRANT OPTION FOR] … ON … FROM ….
type grantStmt struct {
	at          Pos
	revoke      bool
	grantOption bool
	privileges  []word // "SELECT ROW", "ydb.granular.select_row", "ALL"
	objects     []grantObject
	members     []word
}

// grantObject is what a grant is on: a YDB scheme path
// (`.metadata/workload_manager/pools/olap`, `/my_db`) or, in the host form
// ON RESOURCE POOL name, a pool.
type grantObject struct {
	pos  Pos
	path string
	pool string
}

func (s *createStmt) Pos() Pos { return s.at }
func (s *alterStmt) Pos() Pos  { return s.at }
func (s *dropStmt) Pos() Pos   { return s.at }
func (s *grantStmt) Pos() Pos  { return s.at }
func (*createStmt) stmt()      {}
func (*alterStmt) stmt()       {}
func (*dropStmt) stmt()        {}
func (*grantStmt) stmt()       {}

// Parse reads a pool file: statements separated by ';', keywords in any
// case, -- and /* */ comments, names bare, `back-quoted`, 'single' or
// "double" quoted. file names the source in positions. Every syntax error
// is reported (as an ErrorList); after one, parsing resumes at the next
// ';'. Parse checks only the form: names, parameters and values are
// checked by Apply.
func Parse(file string, src []byte) ([]Stmt, error) {
	toks, errs := lex(file, src)
	p := &parser{toks: toks, errs: errs}
	var stmts []Stmt
	for p.peek().kind != tokEOF {
		if p.peek().kind == tokSemi {
			p.next()
			continue
		}
		s, ok := p.statement()
		if ok {
			if t := p.peek(); t.kind != tokSemi && t.kind != tokEOF {
				p.fail(t, "expected ';' after the statement, found %s", t.describe())
				ok = false
			}
		}
		if !ok {
			p.skipStatement()
			continue
		}
		stmts = append(stmts, s)
	}
	if len(p.errs) > 0 {
		sortErrors(p.errs)
		return nil, p.errs
	}
	return stmts, nil
}

// parser is a recursive-descent parser over the token slice.
type parser struct {
	toks []token
	i    int
	errs ErrorList
}

func (p *parser) peek() token { return p.toks[p.i] }

// peekN looks n tokens ahead, stopping at EOF.
func (p *parser) peekN(n int) token {
	if p.i+n >= len(p.toks) {
		return p.toks[len(p.toks)-1]
	}
	return p.toks[p.i+n]
}

// fail reports a syntax error at t, unless t is a lexical error that was
// reported already.
func (p *parser) fail(t token, format string, args ...any) {
	if t.kind != tokInvalid {
		p.errs.errorf(t.pos, format, args...)
	}
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

// skipStatement moves past the next ';' (or to EOF) after an error.
func (p *parser) skipStatement() {
	for {
		t := p.next()
		if t.kind == tokSemi || t.kind == tokEOF {
			return
		}
	}
}

// keyword consumes kw or reports what was expected instead.
func (p *parser) keyword(kw, context string) bool {
	t := p.peek()
	if t.is(kw) {
		p.next()
		return true
	}
	p.fail(t, "expected %s%s, found %s", kw, context, t.describe())
	return false
}

// expect consumes a token of kind k or reports what was expected.
func (p *parser) expect(k tokenKind, context string) (token, bool) {
	t := p.peek()
	if t.kind == k {
		return p.next(), true
	}
	p.fail(t, "expected %s%s, found %s", k, context, t.describe())
	return t, false
}

// name consumes a name: a bare word, a `quoted` name or a 'string'.
func (p *parser) name(what string) (word, bool) {
	t := p.peek()
	switch t.kind {
	case tokIdent, tokQuoted, tokString:
		p.next()
		return word{text: t.text, pos: t.pos}, true
	}
	p.fail(t, "expected %s, found %s", what, t.describe())
	return word{}, false
}

// statement parses one statement up to (not including) its ';'.
func (p *parser) statement() (Stmt, bool) {
	t := p.peek()
	switch {
	case t.is("CREATE"):
		return p.create()
	case t.is("ALTER"):
		return p.alter()
	case t.is("DROP"):
		return p.drop()
	case t.is("GRANT"):
		return p.grant(false)
	case t.is("REVOKE"):
		return p.grant(true)
	}
	p.fail(t, "expected a statement (CREATE, ALTER or DROP RESOURCE POOL [CLASSIFIER], GRANT, REVOKE), found %s", t.describe())
	return nil, false
}

// object parses RESOURCE POOL [CLASSIFIER] name after CREATE/ALTER/DROP.
// CLASSIFIER is the keyword unless it is itself the pool's name, which is
// the case when what follows it could not be a name (WITH, SET, RESET,
// ';', end of file).
func (p *parser) object(verb string) (classifier bool, name word, ok bool) {
	if !p.keyword("RESOURCE", " after "+verb) || !p.keyword("POOL", " after "+verb+" RESOURCE") {
		return false, word{}, false
	}
	if p.peek().is("CLASSIFIER") {
		after := p.peekN(1)
		switch {
		case after.kind == tokSemi || after.kind == tokEOF, after.is("WITH"), after.is("SET"), after.is("RESET"):
		default:
			p.next()
			classifier = true
		}
	}
	what := "a pool name"
	if classifier {
		what = "a classifier name"
	}
	name, ok = p.name(what)
	return classifier, name, ok
}

func (p *parser) create() (Stmt, bool) {
	at := p.next().pos
	classifier, name, ok := p.object("CREATE")
	if !ok {
		return nil, false
	}
	s := &createStmt{at: at, classifier: classifier, name: name}
	if p.peek().is("WITH") {
		p.next()
		if s.settings, ok = p.settings("WITH"); !ok {
			return nil, false
		}
	}
	return s, true
}

func (p *parser) alter() (Stmt, bool) {
	at := p.next().pos
	classifier, name, ok := p.object("ALTER")
	if !ok {
		return nil, false
	}
	s := &alterStmt{at: at, classifier: classifier, name: name}
	for {
		t := p.peek()
		switch {
		case t.is("SET"):
			p.next()
			set, ok := p.settings("SET")
			if !ok {
				return nil, false
			}
			s.set = append(s.set, set...)
		case t.is("RESET"):
			p.next()
			keys, ok := p.keys()
			if !ok {
				return nil, false
			}
			s.reset = append(s.reset, keys...)
		default:
			p.fail(t, "expected SET (…) or RESET (…) after ALTER RESOURCE POOL %s, found %s", name.text, t.describe())
			return nil, false
		}
		if p.peek().kind != tokComma {
			return s, true
		}
		p.next()
	}
}

func (p *parser) drop() (Stmt, bool) {
	at := p.next().pos
	classifier, name, ok := p.object("DROP")
	if !ok {
		return nil, false
	}
	return &dropStmt{at: at, classifier: classifier, name: name}, true
}

// settings parses ( KEY [= VALUE] {, KEY [= VALUE]} ); an empty list is
// allowed.
func (p *parser) settings(after string) ([]setting, bool) {
	var out []setting
	ok := p.parenList(after, "the parameter list", true, func() bool {
		key, ok := p.name("a parameter name")
		if !ok {
			return false
		}
		st := setting{key: key}
		if p.peek().kind == tokEq {
			p.next()
			t := p.peek()
			switch t.kind {
			case tokNumber, tokString, tokIdent, tokQuoted:
				p.next()
				st.val = value(t)
				st.hasValue = true
			default:
				p.fail(t, "expected a value after %s =, found %s", key.text, t.describe())
				return false
			}
		}
		out = append(out, st)
		return true
	})
	return out, ok
}

// keys parses ( KEY {, KEY} ) after RESET.
func (p *parser) keys() ([]word, bool) {
	var out []word
	ok := p.parenList("RESET", "the RESET list", false, func() bool {
		key, ok := p.name("a parameter name")
		out = append(out, key)
		return ok
	})
	return out, ok
}

// parenList parses ( ITEM {, ITEM} ) after the word after, calling item
// for each ITEM; item reports a problem itself and returns false. empty
// allows "()"; what names the list in messages.
func (p *parser) parenList(after, what string, empty bool, item func() bool) bool {
	if _, ok := p.expect(tokLParen, " after "+after); !ok {
		return false
	}
	if empty && p.peek().kind == tokRParen {
		p.next()
		return true
	}
	for {
		if !item() {
			return false
		}
		t := p.peek()
		switch t.kind {
		case tokComma:
			p.next()
			continue
		case tokRParen:
			p.next()
			return true
		}
		p.fail(t, "expected ',' or ')' in %s, found %s", what, t.describe())
		return false
	}
}

// grant parses
//
//	GRANT privileges ON objects TO members [WITH GRANT OPTION]
//	REVOKE [GRANT OPTION FOR] privileges ON objects FROM members
//
// where a privilege is a 'quoted right name' or keywords (SELECT ROW,
// ALL [PRIVILEGES]), an object is a `scheme path` or, in the host form,
// RESOURCE POOL name {, name}.
func (p *parser) grant(revoke bool) (Stmt, bool) {
	s := &grantStmt{at: p.next().pos, revoke: revoke}
	verb, to := "GRANT", "TO"
	if revoke {
		verb, to = "REVOKE", "FROM"
		if p.peek().is("GRANT") && p.peekN(1).is("OPTION") && p.peekN(2).is("FOR") {
			p.next()
			p.next()
			p.next()
			s.grantOption = true
		}
	}
	privileges := p.commaList(func() bool {
		priv, ok := p.privilege(verb)
		s.privileges = append(s.privileges, priv)
		return ok
	})
	if !privileges || !p.keyword("ON", " after the rights of "+verb) {
		return nil, false
	}
	var ok bool
	if s.objects, ok = p.grantObjects(); !ok || !p.keyword(to, " after the objects of "+verb) {
		return nil, false
	}
	members := p.commaList(func() bool {
		m, ok := p.name("a user or group")
		s.members = append(s.members, m)
		return ok
	})
	if !members {
		return nil, false
	}
	if !revoke && p.peek().is("WITH") {
		p.next()
		if !p.keyword("GRANT", " after WITH") || !p.keyword("OPTION", " after WITH GRANT") {
			return nil, false
		}
		s.grantOption = true
	}
	return s, true
}

// grantObjects parses the objects of GRANT or REVOKE: RESOURCE POOL name
// {, name} or `scheme path` {, `scheme path`}.
func (p *parser) grantObjects() ([]grantObject, bool) {
	var out []grantObject
	if p.peek().is("RESOURCE") && p.peekN(1).is("POOL") {
		p.next()
		p.next()
		ok := p.commaList(func() bool {
			n, ok := p.name("a pool name")
			out = append(out, grantObject{pos: n.pos, pool: n.text})
			return ok
		})
		return out, ok
	}
	ok := p.commaList(func() bool {
		n, ok := p.name("a `scheme path` such as `.metadata/workload_manager/pools/olap`, or RESOURCE POOL name")
		out = append(out, grantObject{pos: n.pos, path: n.text})
		return ok
	})
	return out, ok
}

// commaList parses ITEM {, ITEM}, calling item for each ITEM; item
// reports a problem itself and returns false.
func (p *parser) commaList(item func() bool) bool {
	for {
		if !item() {
			return false
		}
		if p.peek().kind != tokComma {
			return true
		}
		p.next()
	}
}

// privilege parses one right: a quoted name ('ydb.generic.use',
// 'CREATE TABLE') or one or more keywords up to ',', ON, TO or FROM (SELECT ROW,
// ALL PRIVILEGES). Keywords are joined by single spaces.
func (p *parser) privilege(verb string) (word, bool) {
	t := p.peek()
	if t.kind == tokString || t.kind == tokQuoted {
		p.next()
		return word{text: t.text, pos: t.pos}, true
	}
	var words []string
	for t := p.peek(); t.kind == tokIdent && !t.is("ON") && !t.is("TO") && !t.is("FROM"); t = p.peek() {
		words = append(words, p.next().text)
	}
	if len(words) == 0 {
		p.fail(t, "expected a right after %s (SELECT ROW, ALL, 'ydb.generic.use', …), found %s", verb, t.describe())
		return word{}, false
	}
	return word{text: strings.Join(words, " "), pos: t.pos}, true
}
