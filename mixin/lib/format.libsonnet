// How rules/generate.py prints config values, for the mixin's format strings.
local units = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400, w: 604800, y: 31536000 };
local digits = std.set(std.stringChars('0123456789'));

{
  // A Prometheus duration (`38d`, `1h30m`, `500ms`) in seconds, as duration_seconds() does.
  seconds(text)::
    local chars = std.stringChars(text);
    local n = std.length(chars);
    // [total, number so far, unit so far], one character at a time.
    local step(acc, ch) =
      if std.setMember(ch, digits) then
        if acc[2] != '' then
          [acc[0] + self.term(text, acc[1], acc[2]), ch, '']
        else [acc[0], acc[1] + ch, '']
      else
        if acc[1] == '' then error 'not a Prometheus duration: ' + text
        else [acc[0], acc[1], acc[2] + ch];
    local end = std.foldl(step, chars, [0, '', '']);
    if n == 0 || end[2] == '' then error 'not a Prometheus duration: ' + text
    else end[0] + self.term(text, end[1], end[2]),

  term(text, number, unit)::
    if std.objectHas(units, unit) then std.parseInt(number) * units[unit]
    else error 'not a Prometheus duration: ' + text,

  // A number as Python's str() prints it (0.7, not jsonnet's 0.69999999999999996). jsonnet 0.18's
  // %g fails on 0, hence the case of its own.
  number(x)::
    if x == 0 then '0' else std.format('%.15g', x),
}
