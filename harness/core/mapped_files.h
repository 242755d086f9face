// The files whose pages twinpath's tensors map (SafetensorsFile::read), watched for the one thing
// a mapping cannot survive: the file written in place while its tensors live, truncated or
// rewritten the way safetensors' own save_file rewrites a path. A read of a page the truncation
// took raises SIGBUS; the handler installed here names the file in one sentence and exits with
// code 2 instead of dumping core. A rewrite the process read no page of during its truncation is
// silent (the mapping then shows the new bytes): changed_files() finds it afterwards from the
// file's size and modification time, and the command refuses its own results. A tool that
// writes a new file and renames it over the old one (twinpath's own writers) changes nothing
// here: the mapped pages are the old file's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tp::mapped_files {

// The open file `fd` (at `path`) as one whose pages may be mapped: its index in the watch list
// (the same index for a file watched before), or -1 when the list is full or the file cannot be
// examined, and then nothing of it may be mapped.
int watch(int fd, const std::string& path);

// [begin, begin + length) is mapped from watched file `file`; false when the table of ranges is
// full (then copy instead of mapping). remove() forgets it, before it is unmapped.
bool add(int file, const void* begin, std::size_t length);
void remove(const void* begin);

// The paths of the watched files whose size or modification time is not what it was when they
// were first watched.
std::vector<std::string> changed_files();

}  // namespace tp::mapped_files
