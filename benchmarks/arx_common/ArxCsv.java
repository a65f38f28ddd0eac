import java.io.BufferedReader;
import java.io.File;
import java.io.FileReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.regex.Pattern;

import org.deidentifier.arx.AttributeType;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.DataSource;

/**
 * What every benchmark driver of duckanon loads into ARX the same way: a CSV with a header row, its quasi-identifiers
 * with the ARX hierarchies PATTERN names (%s for the attribute, ';'-separated), one sensitive attribute or none, every
 * other column insensitive. Compiled beside each driver (benchmarks/common.py, arx_classpath).
 */
final class ArxCsv {

    private ArxCsv() {
    }

    /** The CSV's column names, from its header row. */
    static String[] header(String csv, char delim) throws IOException {
        try (BufferedReader reader = new BufferedReader(new FileReader(csv, StandardCharsets.UTF_8))) {
            return reader.readLine().split(Pattern.quote(String.valueOf(delim)), -1);
        }
    }

    /** A data source of the CSV's rows, every column read. */
    static DataSource source(String csv, char delim, String[] header) {
        DataSource source = DataSource.createCSVSource(new File(csv), StandardCharsets.UTF_8, delim, true);
        for (String column : header) {
            source.addColumn(column);
        }
        return source;
    }

    /** The CSV as ARX data: the quasi-identifiers with their hierarchies, {@code sensitive} (or null) sensitive. */
    static Data load(String csv, char delim, String pattern, List<String> qis, String sensitive) throws IOException {
        String[] header = header(csv, delim);
        Data data = Data.create(source(csv, delim, header));
        for (String column : header) {
            if (column.equals(sensitive)) {
                data.getDefinition().setAttributeType(column, AttributeType.SENSITIVE_ATTRIBUTE);
            } else if (!qis.contains(column)) {
                data.getDefinition().setAttributeType(column, AttributeType.INSENSITIVE_ATTRIBUTE);
            }
        }
        for (String qi : qis) {
            data.getDefinition().setAttributeType(qi, Hierarchy.create(String.format(pattern, qi),
                                                                        StandardCharsets.UTF_8, ';'));
        }
        return data;
    }
}
