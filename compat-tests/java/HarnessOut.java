// The harnesses' output (KbrokerHarness, ShareHarness): one JSON object per line on stdout, flushed,
// lines from several threads never interleaved; and JSON string quoting. JDK only, found through
// javac's -sourcepath like HarnessShutdown.java (compat-tests/conftest.py: _compiled_harness).

final class HarnessOut {
    private HarnessOut() {
    }

    static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String jsonString(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') sb.append('\\').append(ch);
            else if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch));
            else sb.append(ch);
        }
        return sb.append('"').toString();
    }
}
