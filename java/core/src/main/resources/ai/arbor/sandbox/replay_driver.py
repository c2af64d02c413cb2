# Arbor session replay driver (RemoteSandbox, RUN_CODE mode): one program that restores a session by
# re-running its earlier successful cells with their output suppressed, then runs the new cell with
# notebook semantics (the value of a final bare expression is printed). Exit code 3 with
# "ArborReplayError" on stderr means an earlier cell failed when replayed (the session diverged).
def _arbor_replay(cells):
    import ast, base64, io, linecache, sys, traceback, types
    main = types.ModuleType('__main__')
    main.__dict__['__builtins__'] = __builtins__
    sys.modules['__main__'] = main
    ns = main.__dict__
    out, err = sys.stdout, sys.stderr
    for i, encoded in enumerate(cells):
        src = base64.b64decode(encoded).decode('utf-8')
        name = '<cell-%d>' % (i + 1)
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        last = i == len(cells) - 1
        if last:
            sys.stdout, sys.stderr = out, err
        else:
            sys.stdout = sys.stderr = io.StringIO()
        try:
            tree = ast.parse(src, name)
            expr = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                expr = ast.Expression(tree.body.pop().value)
            exec(compile(tree, name, 'exec'), ns)
            if expr is not None:
                value = eval(compile(expr, name, 'eval'), ns)
                if value is not None and last:
                    print(repr(value))
        except BaseException as e:
            sys.stdout, sys.stderr = out, err
            if type(e).__name__ in ('SoftTimeout', 'OutputLimitExceeded'):
                raise  # an Arbor server's own limits: let its worker report them
            if isinstance(e, SystemExit) and e.code in (None, 0):
                continue
            if not last:
                print('ArborReplayError: cell %d of the session failed when replayed (%s)' % (i + 1, type(e).__name__), file=err)
                sys.stdout.flush()
                sys.exit(3)
            if isinstance(e, SystemExit):
                print('SystemExit: %s' % (e.code,), file=err)
            elif isinstance(e, SyntaxError):
                err.write(''.join(traceback.format_exception_only(type(e), e)))
            else:
                tb = e.__traceback__
                while tb is not None and tb.tb_frame.f_code.co_filename != name:
                    tb = tb.tb_next
                err.write(''.join(traceback.format_exception(type(e), e, tb)))
            sys.stdout.flush()
            sys.exit(1)


_arbor_replay(CELLS)
