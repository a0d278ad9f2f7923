#pragma once
// Text decoding for email bodies and headers: the transfer encodings (quoted-printable, base64),
// RFC 2047 encoded words, HTML to text, UTF-8 repair and whitespace normalisation, with the
// ASCII case-insensitive string helpers they share. spam_corpus.cpp parses a message's MIME
// structure with these.

#include <cstddef>
#include <string>
#include <string_view>

namespace tapegrad::examples::mail {

// ASCII lower case of s (other bytes unchanged).
std::string to_lower(std::string_view s);
// Whether s starts with prefix, ignoring ASCII case.
bool istarts_with(std::string_view s, std::string_view prefix);
// The first position >= from of needle in s, ignoring ASCII case (npos when absent).
std::size_t ifind(std::string_view s, std::string_view needle, std::size_t from = 0);
// s without leading and trailing blanks (space, tab, CR, LF).
std::string_view trim(std::string_view s);

// Valid UTF-8: invalid bytes read as Windows-1252, control characters other than tab and
// newline (C0, DEL and C1) dropped.
std::string sanitize_utf8(std::string_view s);
// The quoted-printable transfer encoding decoded (soft line breaks joined).
std::string decode_quoted_printable(std::string_view s);
// The base64 transfer encoding decoded (characters outside the alphabet skipped).
std::string decode_base64(std::string_view s);
// RFC 2047 encoded words ("=?charset?B|Q?...?=") in a header value decoded.
std::string decode_rfc2047(std::string_view s);
// HTML as text: tags, comments, script and style dropped, block tags as line breaks, entities
// decoded (those of control characters, such as &#x14; or &#127;, dropped).
std::string strip_html(std::string_view s);
// Runs of blanks collapsed, lines trimmed, at most one blank line in a row and none at either end.
std::string normalize_whitespace(std::string_view s);

}  // namespace tapegrad::examples::mail
