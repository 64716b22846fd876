package gen

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	// The descriptors the schema's messages are paired with, registered for the look-up by
	// Go type (the collector packages bring in every OTLP message).
	_ "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	_ "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	_ "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// The files of package fastpath Load reads, and nothing else: the walkers are regenerated from
// source, so a walk_gen.go that no longer compiles (a schema change, a generator change) does
// not stop its own regeneration.
const (
	schemaFile   = "schema.go"      // the table, its kinds, flags and messages
	signalFile   = "signal.go"      // the Signal constants resourceMsg is indexed by
	messagesFile = "schema_test.go" // schemaMessages: the generated message behind each table
)

// kinds maps fastpath's wire kind constants to the generator's, by name.
var kinds = map[string]Kind{
	"kVarint": Varint, "kFixed32": Fixed32, "kFixed64": Fixed64, "kBytes": Bytes,
	"kString": String, "kMessage": Message, "kPackedFixed64": PackedFixed64,
	"kPackedVarint": PackedVarint, "kTraceID": TraceID, "kSpanID": SpanID,
}

// loader holds what Load learned of the source so far.
type loader struct {
	fset  *token.FileSet
	info  *types.Info
	kinds map[int64]string         // wire kind value → constant name
	flags map[string]int64         // field flag constant name → value
	msgs  map[int64]string         // msgID value → constant name
	vars  map[string]field         // package-level schemaField variables
	funcs map[string]*ast.FuncDecl // package-level functions returning a schemaField
	cmts  []*ast.CommentGroup      // of schema.go
}

// field is a schemaField as evaluated from source.
type field struct {
	kind  string // constant name, "" for kUnknown
	flags int64
	msg   int64
}

// Load reads the wire schema of package fastpath from the source files in dir: the table
// schema and resourceMsg of schema.go, evaluated from their syntax (constants through
// go/types, helper variables and functions by substitution), and the descriptors
// schemaMessages pairs each message with, which name messages and fields. It accepts the
// forms schema.go uses and fails on any other, rather than guess.
func Load(dir string) (Schema, error) {
	l := &loader{fset: token.NewFileSet(), kinds: map[int64]string{}, flags: map[string]int64{},
		msgs: map[int64]string{}, vars: map[string]field{}, funcs: map[string]*ast.FuncDecl{}}
	var files []*ast.File
	for _, name := range []string{schemaFile, signalFile} {
		f, err := parser.ParseFile(l.fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return Schema{}, err
		}
		files = append(files, f)
	}
	schemaAST := files[0]
	l.cmts = schemaAST.Comments
	l.info = &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{}}
	// The two files are not the whole package: what they use from elsewhere is reported and
	// ignored. The constants they declare are all that is read from the checker.
	conf := types.Config{Error: func(error) {}}
	pkg, _ := conf.Check("fastpath", l.fset, files, l.info)
	for _, name := range pkg.Scope().Names() {
		c, ok := pkg.Scope().Lookup(name).(*types.Const)
		if !ok {
			continue
		}
		v, ok := constant.Int64Val(c.Val())
		if !ok {
			continue
		}
		switch c.Type().String() {
		case "fastpath.wireKind":
			l.kinds[v] = name
		case "fastpath.msgID":
			if name != "numMsgs" {
				l.msgs[v] = name
			}
		case "uint8":
			if strings.HasPrefix(name, "f") {
				l.flags[name] = v
			}
		}
	}
	var table, roots *ast.CompositeLit
	for _, d := range schemaAST.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
			l.funcs[fn.Name.Name] = fn
		}
	}
	for _, d := range schemaAST.Decls {
		d, ok := d.(*ast.GenDecl)
		if !ok || d.Tok != token.VAR {
			continue
		}
		for _, sp := range d.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				v := vs.Values[i]
				switch {
				case n.Name == "schema":
					table, _ = v.(*ast.CompositeLit)
				case n.Name == "resourceMsg":
					roots, _ = v.(*ast.CompositeLit)
				case l.info.Types[v].Type != nil && l.info.Types[v].Type.String() == "fastpath.schemaField":
					f, err := l.eval(v, nil)
					if err != nil {
						return Schema{}, fmt.Errorf("gen: %s: %w", n.Name, err)
					}
					l.vars[n.Name] = f
				}
			}
		}
	}
	if table == nil || roots == nil {
		return Schema{}, fmt.Errorf("gen: %s declares no schema or resourceMsg table", schemaFile)
	}
	descs, err := l.descriptors(filepath.Join(dir, messagesFile))
	if err != nil {
		return Schema{}, err
	}
	s := Schema{Msgs: make([]Msg, len(l.msgs))}
	for v, name := range l.msgs {
		md, ok := descs[name]
		if !ok {
			return Schema{}, fmt.Errorf("gen: message %s has no descriptor in %s", name, messagesFile)
		}
		full := strings.TrimPrefix(string(md.FullName()), string(md.ParentFile().Package())+".")
		s.Msgs[v] = Msg{Name: strings.ReplaceAll(full, ".", ""), Const: name}
	}
	for _, e := range table.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			return Schema{}, l.errAt(e, "a table entry is not keyed by its message")
		}
		m, err := l.constInt(kv.Key)
		if err != nil {
			return Schema{}, err
		}
		if s.Msgs[m].Fields, err = l.fields(kv.Value, descs[l.msgs[m]]); err != nil {
			return Schema{}, fmt.Errorf("gen: %s: %w", l.msgs[m], err)
		}
	}
	for _, e := range roots.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			return Schema{}, l.errAt(e, "resourceMsg is not keyed by signal")
		}
		sig, err := l.constInt(kv.Key)
		if err != nil {
			return Schema{}, err
		}
		m, err := l.constInt(kv.Value)
		if err != nil {
			return Schema{}, err
		}
		for int64(len(s.Roots)) <= sig {
			s.Roots = append(s.Roots, -1)
		}
		s.Roots[sig] = int(m)
	}
	return s, nil
}

// fields reads one message's table, {number: field, ...}, in the order of the numbers.
func (l *loader) fields(e ast.Expr, md protoreflect.MessageDescriptor) ([]Field, error) {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil, l.errAt(e, "a message's table is not a literal")
	}
	byNum := map[int]Field{}
	maxNum := 0
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			return nil, l.errAt(el, "a field is not keyed by its number")
		}
		n, err := l.constInt(kv.Key)
		if err != nil {
			return nil, err
		}
		num := int(n)
		f, err := l.eval(kv.Value, nil)
		if err != nil {
			return nil, err
		}
		if f.kind == "" {
			continue // kUnknown
		}
		kind, ok := kinds[f.kind]
		if !ok {
			return nil, l.errAt(kv.Value, "wire kind %s unknown to the generator", f.kind)
		}
		out := Field{Num: num, Kind: kind, Msg: int(f.msg),
			Path: f.flags&l.flags["fPath"] != 0, Item: f.flags&l.flags["fItem"] != 0,
			Oneof: f.flags&l.flags["fOneof"] != 0, Legacy: f.flags&l.flags["fLegacy"] != 0}
		if out.Legacy {
			// A reserved number has no descriptor: its name is the first word of the
			// comment on its line of the table.
			out.Name = l.lineComment(kv)
		} else if fd := md.Fields().ByNumber(protoreflect.FieldNumber(num)); fd != nil {
			out.Name = string(fd.Name())
		}
		if out.Name == "" {
			return nil, l.errAt(kv, "%s has no field %d", md.FullName(), num)
		}
		byNum[num] = out
		maxNum = max(maxNum, num)
	}
	var fs []Field
	for num := range maxNum + 1 {
		if f, ok := byNum[num]; ok {
			fs = append(fs, f)
		}
	}
	return fs, nil
}

// eval evaluates a schemaField expression: a package variable, a call of a package function
// of one parameter that returns a schemaField literal, or such a literal, whose values are
// constants or the parameter (bound in env).
func (l *loader) eval(e ast.Expr, env map[string]int64) (field, error) {
	switch e := e.(type) {
	case *ast.Ident:
		if f, ok := l.vars[e.Name]; ok {
			return f, nil
		}
	case *ast.CallExpr:
		id, _ := e.Fun.(*ast.Ident)
		if id == nil || l.funcs[id.Name] == nil || len(e.Args) != 1 {
			break
		}
		fn := l.funcs[id.Name]
		params := fn.Type.Params.List
		if len(params) != 1 || len(params[0].Names) != 1 || len(fn.Body.List) != 1 {
			return field{}, l.errAt(e, "%s is not a function of one parameter returning a literal", id.Name)
		}
		ret, ok := fn.Body.List[0].(*ast.ReturnStmt)
		if !ok || len(ret.Results) != 1 {
			return field{}, l.errAt(fn, "%s does not return a literal", id.Name)
		}
		arg, err := l.value(e.Args[0], env)
		if err != nil {
			return field{}, err
		}
		return l.eval(ret.Results[0], map[string]int64{params[0].Names[0].Name: arg})
	case *ast.CompositeLit:
		var f field
		for _, el := range e.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				return field{}, l.errAt(el, "a schemaField literal without field names")
			}
			v, err := l.value(kv.Value, env)
			if err != nil {
				return field{}, err
			}
			switch kv.Key.(*ast.Ident).Name {
			case "kind":
				name, ok := l.kinds[v]
				if !ok {
					return field{}, l.errAt(kv.Value, "not a wire kind")
				}
				if name != "kUnknown" {
					f.kind = name
				}
			case "flags":
				f.flags = v
			case "msg":
				f.msg = v
			default:
				return field{}, l.errAt(kv, "unknown schemaField field")
			}
		}
		return f, nil
	}
	return field{}, l.errAt(e, "not a schemaField the generator can read")
}

// value is the integer value of a constant expression, or of a bound parameter.
func (l *loader) value(e ast.Expr, env map[string]int64) (int64, error) {
	if id, ok := e.(*ast.Ident); ok {
		if v, ok := env[id.Name]; ok {
			return v, nil
		}
	}
	return l.constInt(e)
}

func (l *loader) constInt(e ast.Expr) (int64, error) {
	tv, ok := l.info.Types[e]
	if !ok || tv.Value == nil {
		return 0, l.errAt(e, "not a constant")
	}
	v, ok := constant.Int64Val(tv.Value)
	if !ok {
		return 0, l.errAt(e, "not an integer constant")
	}
	return v, nil
}

// lineComment returns the first word of the comment that follows n on its line.
func (l *loader) lineComment(n ast.Node) string {
	end := l.fset.Position(n.End())
	for _, g := range l.cmts {
		if p := l.fset.Position(g.Pos()); p.Line != end.Line || p.Offset < end.Offset {
			continue
		}
		if w := strings.Fields(strings.TrimPrefix(g.List[0].Text, "//")); len(w) > 0 {
			return strings.TrimRight(w[0], ",")
		}
	}
	return ""
}

// descriptors reads schemaMessages, {mX: &pkg.Type{}, ...}, from file, and finds the descriptor
// of each generated type in the registry by its Go package path and name.
func (l *loader) descriptors(file string) (map[string]protoreflect.MessageDescriptor, error) {
	f, err := parser.ParseFile(l.fset, file, nil, 0)
	if err != nil {
		return nil, err
	}
	imports := map[string]string{}
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		name := filepath.Base(path)
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = path
	}
	byGoType := map[string]protoreflect.MessageDescriptor{}
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		t := reflect.TypeOf(mt.Zero().Interface())
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		byGoType[t.PkgPath()+"."+t.Name()] = mt.Descriptor()
		return true
	})
	out := map[string]protoreflect.MessageDescriptor{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "schemaMessages" || len(vs.Values) != 1 {
			return true
		}
		lit, _ := vs.Values[0].(*ast.CompositeLit)
		if lit == nil {
			err = l.errAt(vs, "schemaMessages is not a literal")
			return false
		}
		for _, el := range lit.Elts {
			kv, _ := el.(*ast.KeyValueExpr)
			var key *ast.Ident
			var sel *ast.SelectorExpr
			if kv != nil {
				key, _ = kv.Key.(*ast.Ident)
				if u, _ := kv.Value.(*ast.UnaryExpr); u != nil {
					if c, _ := u.X.(*ast.CompositeLit); c != nil {
						sel, _ = c.Type.(*ast.SelectorExpr)
					}
				}
			}
			if key == nil || sel == nil {
				err = l.errAt(el, "schemaMessages entries must read mX: &pkg.Type{}")
				return false
			}
			pkg := sel.X.(*ast.Ident).Name
			md, ok := byGoType[imports[pkg]+"."+sel.Sel.Name]
			if !ok {
				err = l.errAt(el, "no registered message %s.%s", imports[pkg], sel.Sel.Name)
				return false
			}
			out[key.Name] = md
		}
		return false
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("gen: %s declares no schemaMessages", file)
	}
	return out, err
}

func (l *loader) errAt(n ast.Node, format string, args ...any) error {
	return fmt.Errorf("gen: %s: %s", l.fset.Position(n.Pos()), fmt.Sprintf(format, args...))
}
