// Text decoding for email: see mail_text.h.
#include "examples/spam/mail_text.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace tapegrad::examples::mail {

namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

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
    // Control characters written as entities are dropped like raw ones (C0 but tab and newline,
    // DEL, and the C1 block 0x80..0x9F).
    const bool control = (cp < 0x20 && cp != '\t' && cp != '\n') || (cp >= 0x7F && cp < 0xA0);
    if (!control) append_utf8(out, cp);
    return semi - i + 1;
  }
  static const std::pair<const char*, const char*> kNamed[] = {
      {"amp", "&"},  {"lt", "<"},          {"gt", ">"},         {"quot", "\""},           {"apos", "'"},
      {"nbsp", " "}, {"copy", "\xC2\xA9"}, {"reg", "\xC2\xAE"}, {"trade", "\xE2\x84\xA2"}};
  for (const auto& [entity, text] : kNamed)
    if (name == entity) {
      out += text;
      return semi - i + 1;
    }
  return 0;
}

bool is_block_tag(std::string_view name) {
  static const char* const kBlock[] = {"br",    "p",          "div", "tr",    "li",     "ul", "ol",
                                       "table", "h1",         "h2",  "h3",    "h4",     "h5", "h6",
                                       "hr",    "blockquote", "pre", "title", "center", "dd", "dt"};
  for (const char* tag : kBlock)
    if (name == tag) return true;
  return false;
}

}  // namespace

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

std::size_t ifind(std::string_view s, std::string_view needle, std::size_t from) {
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

// Code points of the Windows-1252 bytes 0x80..0x9F (the five undefined ones kept as C1 codes).
constexpr std::uint32_t kWindows1252[32] = {0x20AC, 0x81,   0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
                                            0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x8D,   0x017D, 0x8F,
                                            0x90,   0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
                                            0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x9D,   0x017E, 0x0178};

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
    // Control characters other than tab and newline (NUL, the escapes of ISO-2022 text, DEL, and
    // the C1 controls U+0080..U+009F when validly encoded) are dropped: they carry no words and
    // upset terminals and JSON.
    const bool control = (c < 0x20 && c != '\t' && c != '\n') || c == 0x7F || (ok && cp >= 0x80 && cp < 0xA0);
    if (control) {
      i += ok ? n : 1;
    } else if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      append_utf8(out, c >= 0x80 && c < 0xA0 ? kWindows1252[c - 0x80] : c);
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
      while (name_end < close &&
             ((lower(s[name_end]) >= 'a' && lower(s[name_end]) <= 'z') || (s[name_end] >= '0' && s[name_end] <= '9')))
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

}  // namespace tapegrad::examples::mail
