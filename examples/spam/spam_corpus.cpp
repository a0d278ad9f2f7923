#include "examples/spam/spam_corpus.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tapegrad/autograd/error.h"

namespace tapegrad::examples {

namespace {

namespace fs = std::filesystem;

// Past this nesting depth of multiparts (or forwarded messages) parts are ignored: real mail
// stays far below it, and it bounds the recursion on hostile input.
constexpr int kMaxDepth = 16;

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

bool istarts_with(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (lower(s[i]) != lower(prefix[i])) return false;
  return true;
}

std::size_t ifind(std::string_view s, std::string_view needle, std::size_t from = 0) {
  if (needle.empty() || s.size() < needle.size()) return std::string_view::npos;
  for (std::size_t i = from; i + needle.size() <= s.size(); ++i)
    if (lower(s[i]) == lower(needle[0]) && istarts_with(s.substr(i), needle)) return i;
  return std::string_view::npos;
}

std::string_view trim(std::string_view s) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Code points of the Windows-1252 bytes 0x80..0x9F (the five undefined ones kept as C1 codes).
constexpr std::uint32_t kWindows1252[32] = {
    0x20AC, 0x81,   0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
    0x2039, 0x0152, 0x8D,   0x017D, 0x8F,   0x90,   0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
    0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x9D,   0x017E, 0x0178};

// Most non-UTF-8 mail of the corpus is Latin-1 or Windows-1252 (its superset in practice), so a
// byte outside a well-formed UTF-8 sequence is read as the Windows-1252 character of that value.
std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0, min = 0;
    if (c < 0x80) n = 1, cp = c;
    else if ((c & 0xE0) == 0xC0) n = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) n = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) n = 4, cp = c & 0x07, min = 0x10000;
    bool ok = n != 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    // Control characters other than tab and newline (NUL, the escapes of ISO-2022 text ...) are
    // dropped: they carry no words and upset terminals and JSON.
    const bool control = c < 0x20 && c != '\t' && c != '\n';
    if (ok && !control) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      if (!control) append_utf8(out, c >= 0x80 && c < 0xA0 ? kWindows1252[c - 0x80] : c);
      ++i;
    }
  }
  return out;
}

std::string decode_quoted_printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '=') {
      out.push_back(s[i]);
      continue;
    }
    // A soft line break: '=' then optional trailing whitespace then the end of the line.
    std::size_t j = i + 1;
    while (j < s.size() && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r')) ++j;
    if (j >= s.size() || s[j] == '\n') {
      i = j;
      continue;
    }
    if (i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2])));
      i += 2;
      continue;
    }
    out.push_back('=');  // not an escape: kept as written, as decoders commonly do
  }
  return out;
}

std::string decode_base64(std::string_view s) {
  std::string out;
  out.reserve(s.size() * 3 / 4);
  std::uint32_t buffer = 0;
  int bits = 0;
  for (char c : s) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') break;
    else continue;  // line breaks and stray characters
    buffer = (buffer << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  return out;
}

// RFC 2047 encoded words, =?charset?Q?text?= and =?charset?B?text?=. The charset is not
// converted (sanitize_utf8 handles Latin-1); whitespace between two encoded words is dropped.
std::string decode_rfc2047(std::string_view s) {
  std::string out;
  std::size_t i = 0;
  bool last_was_word = false;
  while (i < s.size()) {
    const std::size_t start = s.find("=?", i);
    if (start == std::string_view::npos) {
      out.append(s.substr(i));
      break;
    }
    const std::size_t q1 = s.find('?', start + 2);
    const std::size_t q2 = q1 == std::string_view::npos ? q1 : s.find('?', q1 + 1);
    const std::size_t end = q2 == std::string_view::npos ? q2 : s.find("?=", q2 + 1);
    if (end == std::string_view::npos || q2 != q1 + 2) {
      out.append(s.substr(i, start + 2 - i));
      i = start + 2;
      last_was_word = false;
      continue;
    }
    const std::string_view gap = s.substr(i, start - i);
    if (!(last_was_word && trim(gap).empty())) out.append(gap);
    const char encoding = lower(s[q1 + 1]);
    const std::string_view text = s.substr(q2 + 1, end - q2 - 1);
    if (encoding == 'b') {
      out += decode_base64(text);
    } else if (encoding == 'q') {
      std::string q(text);
      std::replace(q.begin(), q.end(), '_', ' ');
      out += decode_quoted_printable(q);
    } else {
      out.append(s.substr(start, end + 2 - start));
    }
    i = end + 2;
    last_was_word = true;
  }
  return out;
}

// Decodes one entity starting at s[i] == '&'; returns the characters consumed (0: not an entity).
std::size_t decode_entity(std::string_view s, std::size_t i, std::string& out) {
  const std::size_t semi = s.find(';', i + 1);
  if (semi == std::string_view::npos || semi - i > 10) return 0;
  const std::string name = to_lower(s.substr(i + 1, semi - i - 1));
  if (name.size() > 1 && name[0] == '#') {
    std::uint32_t cp = 0;
    const bool hex = name[1] == 'x';
    for (std::size_t k = hex ? 2 : 1; k < name.size(); ++k) {
      const int d = hex ? hex_value(name[k]) : (name[k] >= '0' && name[k] <= '9' ? name[k] - '0' : -1);
      if (d < 0 || cp > 0x10FFFF) return 0;
      cp = cp * (hex ? 16 : 10) + static_cast<std::uint32_t>(d);
    }
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    if (cp == 0xA0) cp = ' ';
    append_utf8(out, cp);
    return semi - i + 1;
  }
  static const std::pair<const char*, const char*> kNamed[] = {
      {"amp", "&"},  {"lt", "<"},     {"gt", ">"},     {"quot", "\""}, {"apos", "'"},
      {"nbsp", " "}, {"copy", "\xC2\xA9"}, {"reg", "\xC2\xAE"}, {"trade", "\xE2\x84\xA2"}};
  for (const auto& [entity, text] : kNamed)
    if (name == entity) {
      out += text;
      return semi - i + 1;
    }
  return 0;
}

bool is_block_tag(std::string_view name) {
  static const char* const kBlock[] = {"br", "p", "div", "tr", "li", "ul", "ol", "table", "h1", "h2", "h3",
                                       "h4", "h5", "h6", "hr", "blockquote", "pre", "title", "center", "dd", "dt"};
  for (const char* tag : kBlock)
    if (name == tag) return true;
  return false;
}

// Text a browser would show, roughly: tags, comments, scripts and styles gone, block tags as
// line breaks, cells as spaces, source line breaks as spaces, entities decoded.
std::string strip_html(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '<') {
      if (s.compare(i, 4, "<!--") == 0) {
        const std::size_t end = s.find("-->", i + 4);
        i = end == std::string_view::npos ? s.size() : end + 3;
        continue;
      }
      const char next = i + 1 < s.size() ? s[i + 1] : '\0';
      const bool tag_start = (lower(next) >= 'a' && lower(next) <= 'z') || next == '/' || next == '!' || next == '?';
      const std::size_t close = tag_start ? s.find('>', i + 1) : std::string_view::npos;
      if (close == std::string_view::npos) {
        out.push_back('<');
        ++i;
        continue;
      }
      std::size_t n = i + 1 + (next == '/' ? 1 : 0);
      std::size_t name_end = n;
      while (name_end < close && ((lower(s[name_end]) >= 'a' && lower(s[name_end]) <= 'z') ||
                                  (s[name_end] >= '0' && s[name_end] <= '9')))
        ++name_end;
      const std::string name = to_lower(s.substr(n, name_end - n));
      i = close + 1;
      if (next != '/' && (name == "script" || name == "style")) {
        const std::size_t end = ifind(s, "</" + name, i);
        const std::size_t end_close = end == std::string_view::npos ? end : s.find('>', end);
        i = end_close == std::string_view::npos ? s.size() : end_close + 1;
        continue;
      }
      if (is_block_tag(name)) out.push_back('\n');
      else if (name == "td" || name == "th") out.push_back(' ');
      continue;
    }
    if (c == '&') {
      const std::size_t used = decode_entity(s, i, out);
      if (used != 0) {
        i += used;
        continue;
      }
    }
    out.push_back(c == '\n' || c == '\t' || c == '\r' ? ' ' : c);
    ++i;
  }
  return out;
}

// Collapses runs of blanks, trims every line, keeps at most one blank line in a row and none at
// either end.
std::string normalize_whitespace(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t blank_lines = 0;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t eol = s.find('\n', pos);
    if (eol == std::string_view::npos) eol = s.size();
    std::string line;
    bool space = false;
    for (char c : s.substr(pos, eol - pos)) {
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        space = true;
      } else {
        if (space && !line.empty()) line.push_back(' ');
        space = false;
        line.push_back(c);
      }
    }
    if (line.empty()) {
      ++blank_lines;
    } else {
      if (!out.empty()) out.append(blank_lines > 0 ? "\n\n" : "\n");
      out += line;
      blank_lines = 0;
    }
    pos = eol + 1;
  }
  return out;
}

// The headers a message or MIME part needs here; the others are skipped while parsing.
struct Headers {
  std::string subject, content_type, transfer_encoding, disposition;
  bool has_subject = false;
};

bool is_header_line(std::string_view line) {
  const std::size_t colon = line.find(':');
  if (colon == 0 || colon == std::string_view::npos) return false;
  for (std::size_t k = 0; k < colon; ++k)
    if (line[k] <= ' ' || line[k] > '~') return false;
  return true;
}

// Reads the header block at the start of `message` (unfolding continuation lines) and returns
// the body after it. A part starting with a blank line has no headers.
// `complete` tells whether the block ended as headers do: at a blank line or at the end.
std::string_view split_headers(std::string_view message, Headers& headers, bool top_level,
                               bool* complete = nullptr) {
  if (complete) *complete = true;
  std::size_t pos = 0;
  std::string* current = nullptr;
  bool first = true;
  while (pos < message.size()) {
    std::size_t eol = message.find('\n', pos);
    if (eol == std::string_view::npos) eol = message.size();
    std::string_view line = message.substr(pos, eol - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) return message.substr(std::min(message.size(), eol + 1));
    if ((line.front() == ' ' || line.front() == '\t') && !first) {
      if (current) current->append(line);
    } else if (top_level && first && line.substr(0, 5) == "From ") {
      current = nullptr;  // the mbox separator line
    } else if (is_header_line(line)) {
      const std::size_t colon = line.find(':');
      const std::string name = to_lower(trim(line.substr(0, colon)));
      const std::string_view value = trim(line.substr(colon + 1));
      std::string* field = nullptr;
      if (name == "subject" && !headers.has_subject) field = &headers.subject, headers.has_subject = true;
      else if (name == "content-type" && headers.content_type.empty()) field = &headers.content_type;
      else if (name == "content-transfer-encoding" && headers.transfer_encoding.empty())
        field = &headers.transfer_encoding;
      else if (name == "content-disposition" && headers.disposition.empty()) field = &headers.disposition;
      current = field;
      if (field) field->assign(value);
    } else {
      // Not a header: the header block ended without its blank line (or there was none).
      if (complete) *complete = false;
      return message.substr(pos);
    }
    first = false;
    pos = eol + 1;
  }
  return std::string_view();
}

struct ContentType {
  std::string type = "text/plain";
  std::string boundary;
};

ContentType parse_content_type(std::string_view value) {
  ContentType ct;
  if (trim(value).empty()) return ct;
  const std::size_t semi = value.find(';');
  ct.type = to_lower(trim(value.substr(0, semi)));
  std::size_t pos = semi;
  while (pos != std::string_view::npos && pos < value.size()) {
    const std::size_t start = pos + 1;
    const std::size_t eq = value.find('=', start);
    if (eq == std::string_view::npos) break;
    const std::string name = to_lower(trim(value.substr(start, eq - start)));
    std::size_t v = eq + 1;
    while (v < value.size() && (value[v] == ' ' || value[v] == '\t')) ++v;
    std::string param;
    if (v < value.size() && value[v] == '"') {
      const std::size_t end = value.find('"', v + 1);
      param = std::string(value.substr(v + 1, end == std::string_view::npos ? end : end - v - 1));
      pos = end == std::string_view::npos ? end : value.find(';', end);
    } else {
      const std::size_t end = value.find(';', v);
      param = std::string(trim(value.substr(v, end == std::string_view::npos ? end : end - v)));
      pos = end;
    }
    if (name == "boundary") ct.boundary = param;
  }
  return ct;
}

std::string extract_text(const Headers& headers, std::string_view body, int depth);

// The parts between "--boundary" lines (preamble and epilogue dropped).
std::vector<std::string_view> split_multipart(std::string_view body, const std::string& boundary) {
  std::vector<std::string_view> parts;
  const std::string delimiter = "--" + boundary;
  std::size_t part_start = std::string_view::npos;
  std::size_t pos = 0;
  while (pos < body.size()) {
    std::size_t eol = body.find('\n', pos);
    if (eol == std::string_view::npos) eol = body.size();
    const std::string_view line = body.substr(pos, eol - pos);
    if (line.size() >= delimiter.size() && line.compare(0, delimiter.size(), delimiter) == 0) {
      const std::string_view rest = trim(line.substr(delimiter.size()));
      if (rest.empty() || rest == "--") {
        if (part_start != std::string_view::npos) parts.push_back(body.substr(part_start, pos - part_start));
        if (rest == "--") return parts;
        part_start = eol + 1 <= body.size() ? eol + 1 : body.size();
      }
    }
    pos = eol + 1;
  }
  if (part_start != std::string_view::npos && part_start < body.size()) parts.push_back(body.substr(part_start));
  return parts;
}

// The text of one MIME part (empty for an attachment) and its content type.
std::string extract_part(std::string_view part, int depth, std::string& type) {
  Headers headers;
  const std::string_view body = split_headers(part, headers, false);
  type = parse_content_type(headers.content_type).type;
  if (istarts_with(trim(headers.disposition), "attachment")) return {};
  return extract_text(headers, body, depth);
}

// Some mail (spam mostly) is MIME multipart but lost its Content-Type header. Such a body shows
// itself by a "--boundary" line directly followed by a part's Content-Type line, at most a
// one-line preamble ("This is a MIME message") before it; further down, such lines are more
// likely a MIME example quoted in a plain-text mail.
std::string sniff_boundary(std::string_view body) {
  std::size_t pos = 0;
  int text_lines = 0;
  while (pos < body.size() && text_lines <= 1) {
    std::size_t eol = body.find('\n', pos);
    if (eol == std::string_view::npos) break;
    const std::string_view line = trim(body.substr(pos, eol - pos));
    if (line.size() > 2 && line.compare(0, 2, "--") == 0 && istarts_with(body.substr(eol + 1), "content-type:"))
      return std::string(line.substr(2));
    if (!line.empty()) ++text_lines;
    pos = eol + 1;
  }
  return {};
}

std::string extract_text(const Headers& headers, std::string_view body, int depth) {
  if (depth > kMaxDepth) return {};
  ContentType ct = parse_content_type(headers.content_type);
  if (trim(headers.content_type).empty()) {
    std::string boundary = sniff_boundary(body);
    if (!boundary.empty()) ct.type = "multipart/mixed", ct.boundary = std::move(boundary);
  }
  if (ct.type.rfind("multipart/", 0) == 0 && !ct.boundary.empty()) {
    const std::vector<std::string_view> parts = split_multipart(body, ct.boundary);
    if (!parts.empty()) {
      std::vector<std::string> texts;
      std::vector<bool> plain;
      for (std::string_view part : parts) {
        std::string type;
        std::string text = extract_part(part, depth + 1, type);
        if (trim(text).empty()) continue;
        plain.push_back(type == "text/plain");
        texts.push_back(std::move(text));
      }
      if (texts.empty()) return {};
      if (ct.type == "multipart/alternative") {
        // Alternatives say the same thing: keep one, the plain text if there is one.
        const auto it = std::find(plain.begin(), plain.end(), true);
        return it != plain.end() ? texts[static_cast<std::size_t>(it - plain.begin())] : texts.back();
      }
      std::string joined;
      for (const auto& text : texts) joined += (joined.empty() ? "" : "\n\n") + text;
      return joined;
    }
    // A multipart without any delimiter line: read it as plain text below.
  } else if (ct.type == "message/rfc822") {
    Headers inner;
    const std::string_view inner_body = split_headers(body, inner, true);
    const std::string text = extract_text(inner, inner_body, depth + 1);
    const std::string subject = sanitize_utf8(decode_rfc2047(inner.subject));
    return trim(subject).empty() ? text : subject + "\n" + text;
  } else if ((ct.type.rfind("text/", 0) != 0 && ct.type.rfind("multipart/", 0) != 0) ||
             ct.type == "text/rfc822-headers") {
    return {};  // images, applications, a bounce's copy of the headers ...: not text to read
  }

  const std::string encoding = to_lower(trim(headers.transfer_encoding));
  std::string decoded;
  if (encoding == "quoted-printable") decoded = decode_quoted_printable(body);
  else if (encoding == "base64") decoded = decode_base64(body);
  else decoded = std::string(body);
  decoded = sanitize_utf8(decoded);
  const bool html = ct.type == "text/html" || ifind(decoded, "<html") != std::string::npos ||
                    ifind(decoded, "<body") != std::string::npos;
  return html ? strip_html(decoded) : decoded;
}

bool starts_with_headers(std::string_view raw) {
  const std::size_t eol = raw.find('\n');
  std::string_view first = raw.substr(0, eol);
  if (!first.empty() && first.back() == '\r') first.remove_suffix(1);
  return first.substr(0, 5) == "From " || is_header_line(first);
}

std::string read_file(const std::string& path, const char* op) {
  std::error_code error;
  if (fs::is_directory(path, error)) throw IoError(std::string(op) + ": '" + path + "' is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(std::string(op) + ": cannot open '" + path + "'");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw IoError(std::string(op) + ": reading '" + path + "' failed");
  return buffer.str();
}

Email email_from_json(const std::string& path, const std::string& fallback_group, const char* op) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path, op));
  } catch (const nlohmann::json::parse_error& e) {
    throw ValueError(std::string(op) + ": '" + path + "' is not valid JSON (" + e.what() + ")");
  }
  const std::string where = std::string(op) + ": '" + path + "': ";
  if (!j.is_object()) throw ValueError(where + "the top level must be a JSON object");
  const auto text = j.find("text");
  if (text == j.end()) throw ValueError(where + "field 'text' is missing");
  if (!text->is_string()) throw ValueError(where + "field 'text' must be a string");
  Email email;
  email.id = fs::path(path).stem().string();
  email.group = fallback_group;
  if (const auto group = j.find("group"); group != j.end()) {
    if (!group->is_string()) throw ValueError(where + "field 'group' must be a string");
    email.group = group->get<std::string>();
  }
  email.spam = email.group.rfind("spam", 0) == 0;
  parse_email(text->get_ref<const std::string&>(), email.subject, email.body);
  return email;
}

}  // namespace

void parse_email(std::string_view raw, std::string& subject, std::string& body) {
  Headers headers;
  std::string_view content = raw;
  if (starts_with_headers(raw)) {
    // Text like "Note: call me\nBob" looks like a header at first; only a block that ends
    // like a header block is taken for one.
    bool complete = false;
    content = split_headers(raw, headers, true, &complete);
    if (!complete) {
      headers = Headers();
      content = raw;
    }
  }
  subject = normalize_whitespace(sanitize_utf8(decode_rfc2047(headers.subject)));
  std::replace(subject.begin(), subject.end(), '\n', ' ');
  body = normalize_whitespace(extract_text(headers, content, 0));
}

std::string clean_email(std::string_view raw) {
  std::string subject, body;
  parse_email(raw, subject, body);
  return subject + "\n" + body;
}

std::vector<Email> load_spam_corpus(const std::string& dir) {
  const std::string hint = ": run scripts/fetch-spam-corpus.sh to download the SpamAssassin corpus there "
                           "(or set TAPEGRAD_DATA to the folder that holds spam-assassin/)";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw IoError("load_spam_corpus: no corpus folder '" + dir + "'" + hint);
  std::vector<std::pair<std::string, std::string>> files;  // (group, path)
  for (const auto& group : fs::directory_iterator(dir, ec)) {
    if (!group.is_directory()) continue;
    for (const auto& file : fs::directory_iterator(group.path(), ec))
      if (file.is_regular_file() && file.path().extension() == ".json")
        files.emplace_back(group.path().filename().string(), file.path().string());
  }
  if (ec) throw IoError("load_spam_corpus: cannot list '" + dir + "': " + ec.message());
  if (files.empty()) throw IoError("load_spam_corpus: no emails (<group>/*.json) in '" + dir + "'" + hint);
  std::sort(files.begin(), files.end());
  std::vector<Email> emails;
  emails.reserve(files.size());
  for (const auto& [group, path] : files) emails.push_back(email_from_json(path, group, "load_spam_corpus"));
  return emails;
}

Email read_email_file(const std::string& path) {
  if (fs::path(path).extension() == ".json") return email_from_json(path, "", "read_email_file");
  Email email;
  email.id = fs::path(path).filename().string();
  const std::string text = read_file(path, "read_email_file");
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw ValueError("read_email_file: '" + path + "' is empty (" + std::to_string(text.size()) + " bytes of white space)");
  parse_email(text, email.subject, email.body);
  return email;
}

std::string default_spam_corpus_dir() {
  if (const char* root = std::getenv("TAPEGRAD_DATA"); root != nullptr && *root != '\0')
    return (fs::path(root) / "spam-assassin").string();
#ifdef TAPEGRAD_SOURCE_DIR
  return (fs::path(TAPEGRAD_SOURCE_DIR) / "data" / "corpora" / "spam-assassin").string();
#else
  return (fs::path("data") / "corpora" / "spam-assassin").string();
#endif
}

}  // namespace tapegrad::examples
