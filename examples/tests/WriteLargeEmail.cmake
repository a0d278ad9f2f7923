# Writes a raw email whose body is one line of about SIZE_MB megabytes of words to PATH, for the
# test that spam_classifier predict bounds its work per email:
#   cmake -DPATH=file.eml -DSIZE_MB=12 -P WriteLargeEmail.cmake
string(REPEAT "free money click here now " 40000 chunk)  # 1,040,000 bytes
file(WRITE "${PATH}" "Subject: large\n\n")
foreach(i RANGE 1 ${SIZE_MB})
  file(APPEND "${PATH}" "${chunk}")
endforeach()
